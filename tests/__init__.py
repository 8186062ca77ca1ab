"""The tests. Under pytest, the asserts of tests/helpers/ are rewritten as a test module's
are, so that a helper's failing assert shows its values as it did when the helper was in
a test file. Elsewhere (a benchmark that borrows tests/pgserver.py, an interpreter without
pytest) importing the package imports nothing more."""

import sys

if "pytest" in sys.modules:
    sys.modules["pytest"].register_assert_rewrite("tests.helpers")
