"""A stand-in for the workload a probe recipe's cells run (`-- python train.py`)."""
print("training")
