"""Helpers that more than one test file uses (fixtures are in tests/conftest.py):

- ``aorta``: what ``survey check --recipe`` answers of aorta's cells;
- ``api``: the service's clients and pages;
- ``browser``: the browser tier's chromium;
- ``images``: the podman tier's test images;
- ``probe``: running the probe as the host does;
- ``serve``: ``survey serve`` as a process of its own;
- ``store``: stores filled and read as the tests need them;
- ``summary``: the stored cells against the cells worked out from the runs.

Environments (fake Triton packages, an installed aorta, venvs from PyPI) are in tests/envs.py."""
