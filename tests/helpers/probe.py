"""Run the probe as the host does (a bundle on stdin) and read its report."""

from __future__ import annotations

import json
import os
from pathlib import Path

from survey.environments import probe as probe_run
from survey.evidence.report import parse_report


def run_probe(python: str, args: list[str], *, pythonpath: Path | None = None, extra_env: dict[str, str] | None = None,
              timeout: float = 120) -> tuple[dict, probe_run.BundleOutput]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    env.update(extra_env or {})
    out = probe_run.run_bundle([python], args, timeout, env=env)
    raw, _ = probe_run.collect_report(out, python)
    parse_report(raw)  # every report the probe prints is valid against the schema
    return json.loads(raw), out


def by_check(report: dict, env: str = "clean", stub: bool = False) -> dict[tuple[str, str | None], dict]:
    return {(m["backend"], m["mode"]): m for m in report["modes"] if m["env"] == env and m["stub"] == stub}
