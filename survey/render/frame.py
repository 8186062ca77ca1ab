"""The evidence as one tidy pandas DataFrame: the Python API for analysis, and what
``survey export --format parquet|csv`` writes.

One row per environment × platform × backend × mode × check, for the evidence each
(candidate, platform) publishes (its latest complete run, read as the matrix reads
it: ``survey.verdicts.matrix``). ``check`` is ``start`` (``proton.start`` with the
backend and mode: its outcome and the verdict) or ``capture`` (a GELU capture with
them, where one ran: its outcome and what it recorded)::

    from survey.render.frame import evidence_frame

    df = evidence_frame("sqlite:///survey.db")
    df[df.check == "start"].pivot_table(index="triton_version", columns="backend",
                                        values="verdict", aggfunc=lambda v: (v == "accepted").mean())

Columns are typed: categories for the closed vocabularies (backend, mode, check,
outcome, verdict, verdict_source, kind, scope), nullable integers and floats, the
date as a UTC timestamp, text as pandas strings. pandas is imported here only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from probes import outcomes as O
from survey.core.errors import ExtraMissing
from survey.evidence.queries import MODE_LABELS
from survey.render import table
from survey.verdicts import matrix as matrix_mod
from survey.verdicts.modes import Acceptance

if TYPE_CHECKING:
    import pandas as pd

    from db.store import Store

CHECKS = ("start", "capture")
COLUMNS: dict[str, str] = {  # name -> pandas dtype (categories below)
    "candidate": "string", "label": "string", "kind": "category", "scope": "category",
    "environment": "string", "platform": "string", "platform_label": "string", "triton_version": "string",
    "backend": "category", "mode": "category", "check": "category", "outcome": "category",
    "verdict": "category", "verdict_source": "category", "stub_outcome": "category", "library": "string",
    "reason": "string", "kernel_count": "Int64", "gpu_time_ns": "Float64", "run_id": "Int64",
    "date": "datetime64[ns, UTC]",
}
CATEGORIES: dict[str, list[str]] = {
    "kind": ["pip", "python", "image", "ingested"], "scope": ["catalog", "adhoc"],
    "backend": list(O.BACKENDS), "mode": list(MODE_LABELS), "check": list(CHECKS), "outcome": list(O.OUTCOMES),
    "verdict": [str(a) for a in Acceptance], "verdict_source": ["live", "stub"], "stub_outcome": list(O.OUTCOMES),
}
FORMATS = ("parquet", "csv")


def records(store: Store, scope: str = "catalog") -> list[dict[str, Any]]:
    """The rows of the frame as plain dicts (no pandas)."""
    with store.session() as s:
        rows = [r for r in matrix_mod.matrix(s, scope=scope) if r["status"] == "measured"]
    out: list[dict[str, Any]] = []
    for r in rows:
        base = {k: r.get(k) for k in ("candidate", "label", "kind", "scope", "environment", "platform",
                                      "platform_label", "triton_version", "backend", "mode", "run_id", "date")}
        out.append({**base, "check": "start", "outcome": r["outcome"], "verdict": r["verdict"],
                    "verdict_source": r["verdict_source"], "stub_outcome": r["stub_outcome"],
                    "library": r["library"], "reason": r["reason"]})
        if r["capture_outcome"] is not None:
            out.append({**base, "check": "capture", "outcome": r["capture_outcome"],
                        "kernel_count": r["capture_kernel_count"], "gpu_time_ns": r["capture_gpu_time_ns"]})
    return out


def evidence_frame(store: Store | str | None = None, *, scope: str = "catalog") -> pd.DataFrame:
    """The evidence of ``store`` (a Store, a URL, or None: the default store) as one tidy
    DataFrame; ``scope`` all adds the ad-hoc environments to the catalog's."""
    import pandas as pd

    from db.store import Store

    own = not isinstance(store, Store)
    st = Store(store, create=False) if not isinstance(store, Store) else store
    try:
        rows = records(st, scope)
    finally:
        if own:
            st.close()
    df = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    for name, dtype in COLUMNS.items():
        if name in CATEGORIES:
            df[name] = pd.Categorical(df[name], categories=CATEGORIES[name])
        elif dtype.startswith("datetime"):
            df[name] = pd.to_datetime(df[name], utc=True).dt.as_unit("ns")
        else:
            df[name] = df[name].astype(dtype)  # type: ignore[call-overload]  # a dtype name of COLUMNS
    return df


def can_write(fmt: str) -> None:
    """Raise ExtraMissing where ``fmt`` needs a package that is not installed - asked before
    the store is read, so a missing extra costs nothing."""
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ExtraMissing("--format parquet needs pyarrow, which is not installed: "
                               "pip install 'proton-survey[parquet]'") from None


def write(df: pd.DataFrame, path: Path, fmt: str) -> None:
    """``df`` to ``path`` as parquet (needs pyarrow: the parquet extra) or CSV (the CSV
    writer of ``survey table``: evidence text that a spreadsheet would run is quoted)."""
    can_write(fmt)
    if fmt == "parquet":
        df.to_parquet(path, index=False)
        return
    rows = [{str(k): _plain(v) for k, v in r.items()} for r in df.to_dict("records")]
    with path.open("w", encoding="utf-8", newline="") as f:
        f.writelines(table.stream(rows, list(df.columns), "csv"))


def _plain(value: Any) -> Any:
    """A DataFrame cell as the CSV writer takes it: missing is None, a timestamp ISO 8601."""
    import pandas as pd

    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value):
        return None
    return value.isoformat() if isinstance(value, pd.Timestamp) else value
