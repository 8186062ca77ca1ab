"""The ``survey`` command line (Typer + Rich): one module per command group, registered
on the one app in ``survey.cli.app`` in the order ``survey --help`` lists them. This is
the one place that may start the service (``survey.cli.serve``)."""

from survey.cli import run, evidence, tables, export, changes, check, platform, serve, store  # noqa: F401,I001  (registers the commands, in order)
from survey.cli.app import app, main

__all__ = ["app", "main"]
