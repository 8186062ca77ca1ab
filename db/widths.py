"""Column widths of the evidence store, in characters, declared once.

``db.models`` sizes its columns with them, and whatever must fit a column takes
its limit from here: the report schema's string limits (``survey.evidence.report``),
what ingest cuts, the names rule (``survey.core.names``) and the API's parameters.
Standard library only: the CLI reads them without loading SQLAlchemy.
"""

NAME = 200  # a candidate's name
LABEL = 400  # a candidate's label; an environment's label
PLATFORM_KEY = 300  # nvidia:sm_90:NVIDIA H200
VENDOR = 20  # a platform's vendor
MODEL = 200  # a platform's GPU model
ARCH = 60  # a platform's architecture
TRITON_VERSION = 100  # a run's, an environment's Triton version
PROBE_VERSION = 40
HOST = 200  # the host a run was probed on
BACKEND = 40  # a check's backend
MODE = 80  # a check's mode
RULE = 80  # the classifier rule that named an outcome
LIBRARY = 200  # a library's soname
SIGNAL = 20
EXC_TYPE = 200
