"""proton-survey's probe: runs *inside* a candidate environment.

Standard library only, Python >= 3.8, and it imports nothing else of proton-survey:
the host ships this package whole (as a zip on stdin) into the target interpreter,
which may be a container image that has never seen us.

The report it prints is the one contract every other layer reads; its shape is
published as ``schema/probe-report.v3.schema.json`` and changes only with a bump of
``SCHEMA_VERSION``.
"""

PROBE_VERSION = "3.2.0"
SCHEMA_VERSION = 3
