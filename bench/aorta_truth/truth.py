#!/usr/bin/env python3
"""Ground truth for ``survey check --recipe``: does each aorta cell leave a profile?

    truth.py record OUT [--python PY] [--jobs N] [--timeout S]   (a GPU host; aorta importable by PY)
    truth.py compare OUT [--survey CMD] [--platform sm_90]        (any host with proton-survey)
    truth.py from-log RECORD_LOG OUT                              (OUT/truth.json from record's printed lines)

``record`` runs every recipe under ``recipes/`` exactly as ``aorta sweep run`` runs it
(aorta's own command line, ``aorta.cli:main``, which calls
``aorta.triage.runner.run_recipe``): ``--recipe R --mitigations-file sidecar.json
--output DIR``, and for a ``mode: probe`` recipe the command ``-- PY workload.py``.
Then, for every cell aorta's own loader lists, it reads what the cell left: the
Proton profiles under the cell's collector directory (``.../proton/``), read with
the probe's own reader (``probes/capture.py``: kernels, launches, scopes with cycle
metrics, PC samples, trace events), aorta's own summary of them (the trial's
``proton_*`` metrics), the trial's status and the workload's last words. A cell
*left a profile* when one of its profiles records something measured: a timed
kernel, a scope with cycles, a PC sample or a timed trace event. It writes
``OUT/truth.json``.

``compare`` ingests ``OUT/report.json`` (the probe's report from the same host) into
a temporary store, asks ``survey check CANDIDATE --recipe R --aorta-environments
sidecar.json --platform P --json`` for every recipe (the sidecar every recipe ran
with: its mitigations are the probe axes, its environments the cells'), and prints
one row per cell: what really happened, what survey said, and whether they agree
(exit 0 = a profile is left; exit 2 or "collects no proton" = none; "not enough
evidence" agrees with nothing).
"""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)

from probes import capture  # noqa: E402  (stdlib only: the probe's profile reader)

RECIPES = os.path.join(HERE, "recipes")
SIDECAR = os.path.join(HERE, "sidecar.json")
WORKLOAD = os.path.join(HERE, "workload.py")
AORTA = "import sys; from aorta.cli import main; sys.argv[0] = 'aorta'; main()"
CANDIDATE = "aorta-truth"
TAIL = 3000
# The command each probe recipe's cells run (`aorta sweep run --recipe R -- COMMAND`):
# {py} the interpreter, {here} this directory, {bin} OUT/bin (the console script).
# Every other probe recipe runs `{py} {here}/workload.py` (both kernels in one session).
COMMANDS = {
    "cmd-module-cli.yaml": ["{py}", "-m", "workload"],
    "cmd-module-env.yaml": ["{py}", "-m", "workload"],
    "cmd-pytest-cli.yaml": ["{py}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "{here}/test_workload.py"],
    "cmd-pytest-env.yaml": ["{py}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "{here}/test_workload.py"],
    "cmd-shell-cli.yaml": ["bash", "{here}/run.sh"],
    "cmd-shell-env.yaml": ["bash", "{here}/run.sh"],
    "cmd-console-cli.yaml": ["{bin}/truth-workload"],
    "cmd-console-env.yaml": ["{bin}/truth-workload"],
    "instr-scoped-cli.yaml": ["{py}", "{here}/workload.py", "--kernels", "scoped"],
    "instr-plain-cli.yaml": ["{py}", "{here}/workload.py", "--kernels", "plain"],
    "instr-scoped-env.yaml": ["{py}", "{here}/workload.py", "--kernels", "scoped"],
    "instr-plain-env.yaml": ["{py}", "{here}/workload.py", "--kernels", "plain"],
    "mma-scoped-env.yaml": ["{py}", "{here}/workload.py", "--kernels", "scoped"],
    "mma-scoped-cli.yaml": ["{py}", "{here}/workload.py", "--kernels", "scoped"],
    "pcsampling-scoped-cli.yaml": ["{py}", "{here}/workload.py", "--kernels", "scoped"],
}
DEFAULT_COMMAND = ["{py}", "{here}/workload.py"]
# The recipes whose variables `survey check --measure` measures on the GPU host.
MEASURED = ("probe-overlays.yaml",)
# The shape of the workload's Triton kernels, from its command (survey's kernels=...).
SHAPE_OF = {"scoped": "scoped", "plain": "plain", "both": "mixed"}


def command_for(recipe, py, out):
    return [a.format(py=py, here=HERE, bin=os.path.join(out, "bin")) for a in
            COMMANDS.get(os.path.basename(recipe), DEFAULT_COMMAND)]


def console_script(out, py):
    """OUT/bin/truth-workload: a console script (a Python shebang) running workload.py."""
    path = os.path.join(out, "bin", "truth-workload")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("#!%s\nimport sys\nsys.path.insert(0, %r)\nimport workload\nsys.exit(workload.main())\n" % (py, HERE))
    os.chmod(path, 0o755)
    return path


def recipes():
    return sorted(glob.glob(os.path.join(RECIPES, "*.yaml")))


def _tail(path, limit=TAIL):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "backslashreplace")
    except OSError:
        return None


# --------------------------------------------------------------------------- record
def run_recipe(py, recipe, out, timeout, env, top):
    """One recipe through ``aorta sweep run``, in a process of its own."""
    from aorta.triage.recipe import load_recipe

    loaded = load_recipe(Path(recipe), sidecar_files=(Path(SIDECAR),))
    probe_mode = loaded.probe_extras is not None
    argv = [py, "-c", AORTA, "sweep", "run", "--recipe", recipe, "--mitigations-file", SIDECAR, "--output", out]
    if probe_mode:
        argv += ["--"] + command_for(recipe, py, top)
    os.makedirs(out, exist_ok=True)
    t0 = time.time()
    with open(os.path.join(out, "aorta.stdout"), "wb") as o, open(os.path.join(out, "aorta.stderr"), "wb") as e:
        try:
            proc = subprocess.run(argv, stdout=o, stderr=e, timeout=timeout, env=env, cwd=out,
                                  stdin=subprocess.DEVNULL)
            code, timed_out = proc.returncode, False
        except subprocess.TimeoutExpired:
            code, timed_out = None, True
    return {"argv": argv, "exit_code": code, "timed_out": timed_out, "duration_s": round(time.time() - t0, 2),
            "stdout_tail": _tail(os.path.join(out, "aorta.stdout")),
            "stderr_tail": _tail(os.path.join(out, "aorta.stderr"))}


def read_profile(path):
    """What one profile file records (records.RECORDED), read as the probe reads its own."""
    files = [{"name": os.path.basename(path), "bytes": os.path.getsize(path)}]
    try:
        with open(path, "rb") as f:
            db = json.loads(f.read().decode("utf-8", "replace"))
        if path.endswith(".chrome_trace"):
            rec = capture.recorded_in_trace(db, files)
        else:
            rec = capture.recorded_in_tree(db, files, "hatchet" if path.endswith(".hatchet") else "unknown")
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        rec = capture.nothing_recorded(files, None, "%s: %s" % (type(e).__name__, e))
    return rec


def measured(rec):
    return bool(rec["launches"]) or bool(rec["scopes"]) or bool(rec["pc_samples"])


def cell_dirs(out, ticket, cell, probe_mode):
    if probe_mode:  # aorta sweep run's probe flow: <output>/<ticket>/<cell>/
        pattern = os.path.join(out, ticket, cell)
    else:  # the workload flow: <output>/<ticket>/<workload>/<timestamp>/cells/<cell>/
        pattern = os.path.join(out, ticket, "*", "*", "cells", cell)
    return sorted(p for p in glob.glob(pattern) if os.path.isdir(p))


def matrix_cells(out):
    found = {}
    for path in glob.glob(os.path.join(out, "**", "matrix.json"), recursive=True):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        for c in doc.get("cells") or []:
            found[c.get("name")] = c
    return found


def trial_facts(entry):
    """aorta's own record of each trial of a cell: status, error, its proton_* summary."""
    out = []
    for path in (entry or {}).get("trial_paths") or []:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            out.append({"path": path, "unreadable": True})
            continue
        result = doc.get("result") or {}
        metrics = result.get("metrics") or {}
        out.append({
            "path": path,
            "passed": result.get("passed"),
            "exit_status": doc.get("exit_status"),
            "failure_details": result.get("failure_details"),
            "trial_env": (doc.get("config") or {}).get("_aorta_trial_env"),
            "aorta_proton_metrics": {k: v for k, v in metrics.items() if k.startswith("proton_")},
        })
    return out


def command_facts(cell_dir):
    """What a probe-mode trial ran (the command as aorta wrapped it) and how it ended."""
    out = []
    for path in sorted(glob.glob(os.path.join(cell_dir, "trial_*", "result.json"))):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        out.append({k: doc.get(k) for k in ("argv", "exit_code", "verdict", "timed_out")})
    return out


def workload_said(cell_dir):
    said = []
    for path in sorted(glob.glob(os.path.join(cell_dir, "**", "stdout*"), recursive=True)):
        text = _tail(path, 20000) or ""
        for line in text.splitlines():
            if line.startswith("workload: "):
                try:
                    said.append(json.loads(line[len("workload: "):]))
                except ValueError:
                    said.append(line)
    return said


def stderr_tails(cell_dir):
    tails = {}
    for path in sorted(glob.glob(os.path.join(cell_dir, "**", "stderr*"), recursive=True)):
        text = _tail(path, 1500)
        if text:
            tails[os.path.relpath(path, cell_dir)] = text
    return tails


def why(cell):
    """One line: what the cell left, or why it left nothing."""
    if cell["proton"] is None:
        return "collects no proton (collectors: %s)" % (", ".join(cell["collect"]) or "none")
    measured_ones = [p for p in cell["profiles"] if p["measured"]]
    if measured_ones:
        r = measured_ones[0]["recorded"]
        parts = []
        if r["launches"]:
            parts.append("%d kernel launches (%s)" % (r["launches"], ", ".join(r["kernels"])))
        if r["scopes"]:
            parts.append("%d scopes with %s (%s)" % (len(r["scopes"]), "/".join(r["cycle_metrics"]),
                                                    ", ".join(sorted({sc["name"] for sc in r["scopes"]}))))
        if r["pc_samples"]:
            parts.append("%d PC samples" % r["pc_samples"])
        return "%s %s: %s" % (r["format"], measured_ones[0]["path"].rsplit("/", 1)[-1], "; ".join(parts))
    for t in cell["trials"]:
        for d in t.get("failure_details") or []:
            if d.get("phase") == "setup" or d.get("error"):
                return "trial %s: %s: %s" % (t.get("exit_status"), d.get("type"), d.get("error"))
    for c in cell["commands"]:
        code = c.get("exit_code")
        if code:
            last = ""
            for text in cell["stderr"].values():
                lines = [ln for ln in text.splitlines() if ln.strip()]
                last = lines[-1] if lines else last
            how = "died of %s" % _signal(-code) if code < 0 else "exited %s" % code
            said = [w for w in cell["workload_said"] if isinstance(w, dict)]
            if said and said[-1].get("passed") is False:
                last = "the workload's own check failed" + (": " + last if last else "")
            return "the command %s%s" % (how, ": " + last if last else "")
    if cell["profiles"]:
        return "profile written, records nothing measured (%s)" % ", ".join(
            p["path"].rsplit("/", 1)[-1] for p in cell["profiles"])
    if cell["trials"] and not cell["commands"]:
        return "the workload ran in aorta's own process (%s): no Proton collector attached; trial %s" % (
            cell["workload"], cell["trials"][0].get("exit_status"))
    return "no profile written"


def _signal(num):
    import signal

    try:
        return signal.Signals(num).name
    except ValueError:
        return "signal %d" % num


def record_recipe(recipe, out, runner):
    from aorta.triage.recipe import load_recipe

    loaded = load_recipe(Path(recipe), sidecar_files=(Path(SIDECAR),))
    probe_mode = loaded.probe_extras is not None
    entries = matrix_cells(out)
    cells = []
    for cell in loaded.cells:
        collect = cell.effective_collect(loaded.collect)
        options = cell.effective_collect_options(loaded.collect_options)
        dirs = cell_dirs(out, loaded.ticket, cell.name, probe_mode)
        profiles = []
        for d in dirs:
            for path in sorted(glob.glob(os.path.join(d, "**", "proton", "**", "*"), recursive=True)):
                if os.path.isfile(path):
                    rec = read_profile(path)
                    profiles.append({"path": os.path.relpath(path, out), "recorded": rec, "measured": measured(rec)})
        entry = entries.get(cell.name)
        cells.append({
            "cell": cell.name,
            "workload": loaded.workload,
            "environment": cell.environment,
            "mitigations": list(cell.mitigations),
            "collect": list(collect),
            "proton": (options.get("proton") or {}) if "proton" in collect else None,
            "profile_left": any(p["measured"] for p in profiles),
            "profiles": profiles,
            "cell_dirs": [os.path.relpath(d, out) for d in dirs],
            "cell_error": (entry or {}).get("error"),
            "trials": trial_facts(entry),
            "commands": [c for d in dirs for c in command_facts(d)],
            "workload_said": [w for d in dirs for w in workload_said(d)],
            "stderr": {k: v for d in dirs for k, v in stderr_tails(d).items()},
        })
        cells[-1]["why"] = why(cells[-1])
    return {"recipe": os.path.basename(recipe), "mode": "probe" if probe_mode else "triage", "runner": runner,
            "cells": cells}


def cmd_record(args):
    out = os.path.abspath(args.out)
    runs = os.path.join(out, "runs")
    if os.path.isdir(runs):
        shutil.rmtree(runs)
    # the workload importable as a module (`python -m workload`, the console script,
    # pytest), the shell script's interpreter
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=HERE + (os.pathsep + path if path else ""), TRUTH_PYTHON=args.python)
    console_script(out, args.python)
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futs = {r: pool.submit(run_recipe, args.python, r, os.path.join(runs, os.path.basename(r)[:-5]),
                               args.timeout, env, out) for r in recipes()}
        runners = {r: f.result() for r, f in futs.items()}
    wall = time.time() - t0
    doc = {
        "what": "per aorta cell: did it leave a Proton profile that records something measured",
        "aorta": _version("amd-aorta"),
        "python": args.python,
        "wall_s": round(wall, 1),
        "recipes": [record_recipe(r, os.path.join(runs, os.path.basename(r)[:-5]), runners[r]) for r in recipes()],
    }
    path = os.path.join(out, "truth.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    for rec in doc["recipes"]:
        for c in rec["cells"]:
            print("%-30s %-18s profile left: %-3s %s" % (rec["recipe"], c["cell"], "yes" if c["profile_left"] else "no",
                                                        c["why"]))
    print("truth: %s (%d cells, %.0f s)" % (path, sum(len(r["cells"]) for r in doc["recipes"]), wall))
    return 0


def _version(dist):
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception as e:  # said, not guessed
        return "unknown (%s)" % e


# --------------------------------------------------------------------------- compare
def shape_of(command):
    """The shape of the workload's Triton kernels, from its command."""
    command = command or []
    kernels = command[command.index("--kernels") + 1] if "--kernels" in command[:-1] else "both"
    return SHAPE_OF.get(kernels, "mixed")


def predicted(cell, shape="mixed"):
    """survey's answer as a prediction: True (a profile), False (none), None (no
    answer). A conditional answer is its condition applied to the workload's kernels
    (``shape``): the shape's own measured answer."""
    if cell.get("verdict") == "not_applicable":
        return False
    if cell.get("verdict") == "conditional":
        for lk in cell.get("links") or []:
            kernels = (lk.get("facts") or {}).get("kernels")
            if lk.get("answer") == "conditional" and isinstance(kernels, dict) and shape in kernels:
                return {"yes": True, "no": False}.get(kernels[shape].get("answer"))
        return None
    code = cell.get("exit_code")
    return {0: True, 2: False}.get(code)


def recipe_command(rec):
    """The command aorta really ran for a probe recipe (after `--` in its argv), or None."""
    argv = (rec.get("runner") or {}).get("argv") or []
    return argv[argv.index("--") + 1:] if "--" in argv else None


def compare_rows(truth, check):
    """One row per cell of ``truth`` (a truth.json document): (recipe, cell, profile
    left, what survey said, agree, what really happened). ``check(recipe_path,
    command)`` runs ``survey check CANDIDATE --recipe R --aorta-environments SIDECAR
    --platform P --json -- COMMAND`` against a store holding the report and returns
    (exit code, stdout, stderr): the sidecar is the one every recipe ran with (its
    mitigations are the probe axes, its environments the cells'), the command the
    one aorta ran."""
    rows = []
    for rec in truth["recipes"]:
        command = recipe_command(rec)
        code, stdout, stderr = check(os.path.join(RECIPES, rec["recipe"]), command)
        err = (stderr.strip().splitlines() or ["no output"])[-1]
        try:
            answers = {c["cell"]: c for c in json.loads(stdout)}
        except (ValueError, TypeError, KeyError):
            answers = {}
        for c in rec["cells"]:
            a = answers.get(c["cell"])
            said = ("%s (%s)" % (a["verdict"], a.get("cause")) if a is not None
                    else "no answer: exit %d, %s" % (code, err))
            guess = predicted(a, shape_of(command)) if a is not None else None
            if a is not None and a.get("verdict") == "conditional":
                said += " -> %s for %s kernels" % ({True: "profile", False: "none", None: "?"}[guess],
                                                   shape_of(command))
            rows.append((rec["recipe"], c["cell"], c["profile_left"], said, guess is not None and
                         guess == c["profile_left"], c.get("why", "")))
    return rows


def check_argv(recipe, platform, db, command=None):
    return (["check", CANDIDATE, "--recipe", recipe, "--aorta-environments", SIDECAR, "--platform", platform,
             "--json", "--db", db] + (["--"] + list(command) if command else []))


def cmd_compare(args):
    out = os.path.abspath(args.out)
    with open(os.path.join(out, "truth.json")) as f:
        truth = json.load(f)
    report = os.path.join(out, "report.json")
    survey = args.survey.split()
    work = tempfile.mkdtemp(prefix="aorta-truth-compare-")
    db = "sqlite:///" + os.path.join(work, "survey.db")
    env = dict(os.environ, SURVEY_CACHE=os.path.join(work, "cache"))

    def check(recipe, command):
        proc = subprocess.run(survey + check_argv(recipe, args.platform, db, command), capture_output=True,
                              text=True, env=env)
        return proc.returncode, proc.stdout, proc.stderr

    try:
        ing = subprocess.run(survey + ["ingest", report, "--candidate", CANDIDATE, "--new", "--db", db],
                             capture_output=True, text=True, env=env)
        if ing.returncode != 0:
            sys.stderr.write("compare: survey ingest %s failed (exit %d): %s\n" % (
                report, ing.returncode, (ing.stderr.strip().splitlines() or [""])[-1]))
            return ing.returncode
        for name, path in overlay_reports(out):  # what `measure` measured with each overlay set
            ing = subprocess.run(survey + ["ingest", path, "--candidate", name, "--new", "--db", db],
                                 capture_output=True, text=True, env=env)
            if ing.returncode != 0:
                sys.stderr.write("compare: survey ingest %s failed (exit %d): %s\n" % (
                    path, ing.returncode, (ing.stderr.strip().splitlines() or [""])[-1]))
                return ing.returncode
        rows = compare_rows(truth, check)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(r[0]) + len(r[1]) for r in rows) + 3
    print("%-*s %-8s %-6s %-40s %s" % (width, "recipe / cell", "profile", "agree", "survey check said",
                                        "what really happened"))
    for recipe, cell, left, said, agree, reason in rows:
        print("%-*s %-8s %-6s %-40s %s" % (width, recipe + " / " + cell, "yes" if left else "no",
                                            "yes" if agree else "NO", said, reason))
    agreed = sum(1 for r in rows if r[4])
    print("agreement: %d of %d cells (%.0f%%)" % (agreed, len(rows), 100.0 * agreed / len(rows) if rows else 0))
    return 0


def overlay_reports(out):
    """(candidate, report path) of every overlay report ``measure`` kept: filed as
    CANDIDATE probed with that overlay (survey/aorta/check.py overlay_candidate)."""
    from survey.aorta.check import overlay_candidate

    found = []
    for path in sorted(glob.glob(os.path.join(out, "overlays", "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        env = ((doc.get("origin") or {}).get("interpreter") or {}).get("env") or {}
        if env:
            found.append((overlay_candidate(CANDIDATE, env), path))
    return found


def cmd_measure(args):
    """``survey check PY --recipe R --measure -- COMMAND`` for the recipes whose
    variables the probe measures only with an overlay (MEASURED), into a store of its
    own; every overlay run's report is kept as OUT/overlays/N.json."""
    out = os.path.abspath(args.out)
    db = "sqlite:///" + os.path.join(out, "measure.db")
    survey = args.survey.split()
    for recipe in MEASURED:
        path = os.path.join(RECIPES, recipe)
        argv = survey + ["check", args.python, "--recipe", path, "--aorta-environments", SIDECAR, "--measure",
                         "--timeout", str(args.timeout), "--json", "--db", db, "--"] + command_for(path, args.python,
                                                                                                    out)
        proc = subprocess.run(argv, capture_output=True, text=True)
        with open(os.path.join(out, "measure-%s.json" % recipe[:-5]), "w") as f:
            f.write(proc.stdout)
        print("measure %s: exit %d %s" % (recipe, proc.returncode, (proc.stderr.strip().splitlines() or [""])[-1]))
    sys.path.insert(0, ROOT)
    from sqlalchemy import select

    from db import models as m
    from db.store import Store

    os.makedirs(os.path.join(out, "overlays"), exist_ok=True)
    store = Store(db)
    n = 0
    with store.session() as s:
        for run in s.scalars(select(m.Run)):
            if run.report is None or " +" not in run.candidate.name:
                continue
            n += 1
            with open(os.path.join(out, "overlays", "%d.json" % n), "w") as f:
                f.write(run.report.raw)
    store.close()
    print("measure: %d overlay reports under %s" % (n, os.path.join(out, "overlays")))
    return 0


LOG_LINE = re.compile(r"^(?P<recipe>\S+\.yaml)\s+(?P<cell>\S+)\s+profile left: (?P<left>yes|no)\s*(?P<why>.*)$")


def cmd_from_log(args):
    """A truth.json holding only what ``record`` printed per cell (recipe, cell,
    profile left, why), read back from its log: for a run whose truth.json itself
    was not kept. Says so in the file."""
    recipes = {}  # type: dict
    with open(args.log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LOG_LINE.match(line.rstrip("\n"))
            if m:
                recipes.setdefault(m["recipe"], []).append(
                    {"cell": m["cell"], "profile_left": m["left"] == "yes", "why": m["why"]})
    doc = {"what": "per aorta cell: did it leave a Proton profile that records something measured",
           "derived_from": "the per-cell lines `truth.py record` printed (%s); the rest of that run's truth.json "
                           "was not kept" % os.path.basename(args.log),
           "recipes": [{"recipe": r, "cells": cells} for r, cells in recipes.items()]}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "truth.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print("%d cells from %s" % (sum(len(c) for c in recipes.values()), args.log))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="run every recipe through aorta; write OUT/truth.json")
    r.add_argument("out")
    r.add_argument("--python", default=sys.executable, help="the interpreter aorta and the workload run under")
    r.add_argument("--jobs", type=int, default=6, help="recipes run at once")
    r.add_argument("--timeout", type=float, default=400.0, help="seconds for one recipe")
    c = sub.add_parser("compare", help="survey check every recipe against OUT/truth.json")
    c.add_argument("out")
    c.add_argument("--survey", default="survey", help="the survey command (default: survey on PATH)")
    c.add_argument("--platform", default="sm_90")
    ms = sub.add_parser("measure", help="survey check --measure the overlay recipes (a GPU host, survey importable)")
    ms.add_argument("out")
    ms.add_argument("--python", default=sys.executable)
    ms.add_argument("--survey", default="survey")
    ms.add_argument("--timeout", type=float, default=120.0, help="the probe's timeout per check")
    g = sub.add_parser("from-log", help="OUT/truth.json from the per-cell lines of a record log")
    g.add_argument("log")
    g.add_argument("out")
    args = p.parse_args(argv)
    return {"record": cmd_record, "compare": cmd_compare, "measure": cmd_measure,
            "from-log": cmd_from_log}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
