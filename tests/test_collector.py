"""Every proton-survey process runs with the collector's thresholds of
survey/core/collector.py: the `survey` command, and each process that serves."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from api import serve
from db.store import Store
from survey.core import collector

ROOT = Path(__file__).resolve().parents[1]


def test_the_survey_command_runs_with_the_thresholds() -> None:
    code = ("import gc, sys\nfrom survey.__main__ import main\nsys.argv = ['survey', '--version']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nprint(gc.get_threshold())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == str(collector.THRESHOLDS)
    assert collector.THRESHOLDS != (700, 10, 10)  # CPython's own


def test_a_serving_process_runs_with_the_thresholds(tmp_path: Path) -> None:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        serve.serving_app(store)
        assert gc.get_threshold() == collector.THRESHOLDS
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
        store.close()
