"""``survey export``: the evidence as one tidy table for analysis (``survey.render.frame``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from survey.cli.app import DbOpt, app, err, open_store
from survey.core.errors import InputError, choose


@app.command("export")
def export_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="the file to write")],
    fmt: Annotated[str, typer.Option(
        "--format", help="parquet (needs the parquet extra: pyarrow) or csv")] = "csv",
    show_all: Annotated[bool, typer.Option("--all", help="also ad-hoc evidence (targets checked by path or image, "
                                                         "reports ingested under no catalog name)")] = False,
    db: DbOpt = None,
) -> None:
    """The evidence as one table: a row per environment x platform x backend x mode x check (start, capture),
    typed columns; the same DataFrame as survey.render.frame.evidence_frame() in Python."""
    from survey.render import frame

    choose(fmt, frame.FORMATS, "format")
    frame.can_write(fmt)
    df = frame.evidence_frame(open_store(db, create=False), scope="all" if show_all else "catalog")
    try:
        frame.write(df, output, fmt)
    except OSError as e:
        raise InputError(f"{output}: cannot write it ({e.strerror})")
    err.print(f"{len(df)} rows written to {output}", markup=False, highlight=False)
