"""The ``survey`` command line (Typer + Rich): one module per command group, registered
on the one app in ``survey.cli.app``. This is the one place that may start the service."""

from survey.cli import check, evidence, platform, run, serve, tables  # noqa: F401  (registers the commands)
from survey.cli.app import app, main

__all__ = ["app", "main"]
