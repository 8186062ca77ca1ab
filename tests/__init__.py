"""The tests. pytest rewrites the asserts of tests/helpers/ as it does a test module's, so
that a helper's failing assert shows its values as it did when the helper was in a test
file."""

import pytest

pytest.register_assert_rewrite("tests.helpers")
