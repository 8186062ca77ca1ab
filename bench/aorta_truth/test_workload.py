"""The truth recipes' `python -m pytest` command shape: workload.py as a test."""

import workload


def test_workload():
    assert workload.main() == 0
