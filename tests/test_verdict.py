"""The answer is a type: Verdict and Cause declared once (survey/verdicts/verdict.py),
the exit code derived from the verdict, every probe outcome mapped in one table, and
one model (CheckResult) for `survey check --json`, `/check.json` and OpenAPI."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from probes import outcomes as O
from survey.core import exitcodes
from survey.verdicts.modes import Acceptance
from survey.verdicts.verdict import OUTCOME_CAUSES, Cause, CheckResult, Verdict
from tests.conftest import H200, survey_cli

ROOT = Path(__file__).resolve().parents[1]


def test_every_probe_outcome_has_a_host_meaning() -> None:
    assert set(OUTCOME_CAUSES) == set(O.OUTCOMES)


def test_each_verdict_has_its_exit_code_and_meaning() -> None:
    assert {v: v.exit_code for v in Verdict} == {Verdict.RUNS: exitcodes.OK, Verdict.CANNOT_RUN: exitcodes.CANNOT_RUN,
                                                 Verdict.NOT_ENOUGH_EVIDENCE: exitcodes.NOT_ENOUGH_EVIDENCE}
    assert all(v.meaning and "\n" not in v.meaning for v in Verdict)
    assert all(c.meaning and c.verdict is not Verdict.RUNS for c in Cause)


def answer(**kw: Any) -> CheckResult:
    return CheckResult(**{"reason": "r", "fix": None, "target": "t", "backend": "cupti", "mode": None, **kw})


def test_the_exit_code_is_the_verdicts() -> None:
    assert answer(verdict=Verdict.CANNOT_RUN, cause=Cause.MODE_REFUSED).exit_code == exitcodes.CANNOT_RUN
    assert answer(verdict=Verdict.NOT_ENOUGH_EVIDENCE, cause=Cause.NO_GPU).exit_code == exitcodes.NOT_ENOUGH_EVIDENCE
    assert answer(verdict=Verdict.RUNS, cause=None).exit_code == exitcodes.OK
    unobtainable = answer(verdict=Verdict.NOT_ENOUGH_EVIDENCE, cause=Cause.UNOBTAINABLE)
    assert unobtainable.exit_code == exitcodes.UNOBTAINABLE
    assert list(unobtainable.as_dict())[:3] == ["exit_code", "verdict", "cause"]


@pytest.mark.parametrize("verdict,cause", [(Verdict.RUNS, Cause.NO_GPU), (Verdict.CANNOT_RUN, Cause.NO_GPU),
                                           (Verdict.NOT_ENOUGH_EVIDENCE, Cause.MODE_REFUSED)])
def test_a_cause_never_contradicts_its_verdict(verdict: Verdict, cause: Cause) -> None:
    with pytest.raises(ValidationError):
        answer(verdict=verdict, cause=cause)


# --------------------------------------------------------------------------- no literal outside the enum
# The modules that declare the words: Verdict and Cause, and the mode verdict Acceptance.
DECLARED_IN = {"survey/verdicts/verdict.py", "survey/verdicts/modes.py"}
# String constants elsewhere that are spelled like a verdict, a cause or a mode verdict
# but name something else: (module, word) -> what it names.
OTHER_CONCEPTS = {
    ("api/candidates.py", "runs"): "a candidate's runs: a column, a count, a page of them",
    ("api/history.py", "runs"): "the runs of a history page",
    ("survey/cli/tables.py", "runs"): "the runs of `survey changes --json`",
    ("survey/flows/notify.py", "runs"): "the runs a notification is about",
    ("survey/verdicts/since.py", "runs"): "the runs behind a since line",
    ("survey/verdicts/stability.py", "runs"): "how many times a check ran (repeats)",
    ("survey/verdicts/vocabulary.py", "runs"): "the word the views show for Verdict.RUNS, declared with it",
    ("api/candidates.py", "not_probed"): "a candidate's status (the matrix row's status vocabulary)",
    ("survey/verdicts/matrix.py", "not_probed"): "a matrix row's status",
    ("survey/verdicts/rows.py", "not_probed"): "a matrix row's status, declared in MatrixRow",
    ("api/schemas.py", "unobtainable"): "a run's status (db runs.status: complete, unobtainable, failed)",
    ("survey/verdicts/rows.py", "unobtainable"): "a matrix row's status, declared in MatrixRow",
    ("survey/environments/discovery.py", "unobtainable"): "the status of a run that could not be obtained",
    ("survey/evidence/ingest.py", "unobtainable"): "the status of a run that could not be obtained",
    ("survey/evidence/queries.py", "unobtainable"): "a run's status",
    ("survey/flows/fleet.py", "unobtainable"): "a survey outcome's status (survey/flows/survey.py)",
    ("survey/flows/run.py", "unobtainable"): "a survey outcome's status (survey/flows/survey.py)",
    ("survey/flows/survey.py", "unobtainable"): "a survey outcome's status, declared there (UNOBTAINABLE)",
    ("survey/flows/reporters.py", "unobtainable"): "a survey outcome's status, and its colour",
    ("survey/render/docs_table.py", "unobtainable"): "a run's status",
    ("survey/render/grid.py", "unobtainable"): "a matrix row's status",
    ("survey/evidence/report.py", "library_missing"): "a probe outcome of the report contract (probes/outcomes.py)",
    ("survey/evidence/report.py", "no_gpu"): "a probe outcome of the report contract",
    ("survey/evidence/report.py", "devices_env_rejected"): "a probe outcome of the report contract",
    ("survey/evidence/report.py", "disabled"): "a probe outcome of the report contract",
    ("survey/evidence/report.py", "unstable"): "a probe outcome of the report contract",
    ("survey/evidence/report.py", "absent"): "a fact's status in a report (found, absent, failed)",
    ("survey/verdicts/answers.py", "unknown"): "the answer words (yes, no, unknown) are declared here",
    ("survey/aorta/links.py", "unknown"): "a link's answer words (LinkWord) are declared here",
    ("survey/evidence/identity.py", "unknown"): "a platform whose vendor a report does not name (UNKNOWN_VENDOR)",
    ("survey/flows/fleet.py", "unknown"): "a platform key's unknown vendor or architecture",
    ("survey/cli/tables.py", "unknown"): "a history field with no value shown",
    ("survey/verdicts/answers.py", "unstable"): "the basis of an answer the unstable runs leave open",
    ("survey/verdicts/answers.py", "accepted"): "a question ask() answers (Question.ACCEPTED), declared there",
    ("survey/verdicts/documented.py", "accepted"): "a documented claim (the claims file's `claim:` words)",
    ("survey/verdicts/documented.py", "refused"): "a documented claim",
    ("survey/verdicts/documented.py", "absent"): "a documented claim",
    ("survey/render/docs_table.py", "accepted"): "a documented claim",
    ("survey/render/docs_table.py", "refused"): "a documented claim",
    ("survey/render/docs_table.py", "absent"): "a documented claim",
    ("survey/render/docs_table.py", "crashed"): "the words the docs table prints for a probe outcome",
    ("survey/render/docs_table.py", "hung"): "the words the docs table prints for a probe outcome",
}
WORDS = {str(x) for enum in (Verdict, Cause, Acceptance) for x in enum}


def host_modules() -> list[Path]:
    return sorted(p for p in [*(ROOT / "survey").rglob("*.py"), *(ROOT / "api").rglob("*.py")])


def spelled(path: Path, words: set[str]) -> list[tuple[int, str]]:
    """Every string constant of ``path`` that is one of ``words``."""
    return sorted((n.lineno, n.value) for n in ast.walk(ast.parse(path.read_text()))
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in words)


def spelled_outside(paths: list[Path], root: Path) -> list[str]:
    out = []
    for p in paths:
        rel = p.relative_to(root).as_posix()
        if rel not in DECLARED_IN:
            out += [f"{rel}:{line}: {s!r}" for line, s in spelled(p, WORDS) if (rel, s) not in OTHER_CONCEPTS]
    return out


def test_no_verdict_or_cause_is_spelled_outside_its_enum() -> None:
    """Verdict, Cause (survey/verdicts/verdict.py) and the mode verdict Acceptance
    (survey/verdicts/modes.py) are named through their enums everywhere else in survey/
    and api/: a string constant spelled like one is either that (use the enum) or another
    concept, named in OTHER_CONCEPTS with what it is."""
    assert spelled_outside(host_modules(), ROOT) == []


def test_every_other_concept_is_still_spelled_there() -> None:
    """OTHER_CONCEPTS stays narrow: each entry still matches a constant of its module."""
    stale = [k for k in OTHER_CONCEPTS if (k[0] and not any(s == k[1] for _, s in spelled(ROOT / k[0], WORDS)))]
    assert stale == []


def test_the_scan_finds_a_spelled_verdict(tmp_path: Path) -> None:
    (tmp_path / "survey").mkdir()
    bad = tmp_path / "survey" / "bad.py"
    bad.write_text('if r.verdict == "accepted":\n    pass\nx = {"cause": "no_gpu"}\nf(verdict="runs")\n'
                   'L.Link("start", NO, "b", "hung")\nWORD = "conditional"\n')
    assert spelled_outside([bad], tmp_path) == ["survey/bad.py:1: 'accepted'", "survey/bad.py:3: 'no_gpu'",
                                                "survey/bad.py:4: 'runs'", "survey/bad.py:5: 'hung'"]


# --------------------------------------------------------------------------- one model, three faces
def test_cli_json_check_json_and_openapi_are_one_model(h200_store: Any, make_client: Any) -> None:
    schema = CheckResult.model_json_schema(mode="serialization")
    cli = survey_cli("check", H200, "--backend", "cupti", "--mode", "periodic_flushing", "--json",
                     "--db", h200_store.url)
    printed = json.loads(cli.stdout)
    assert cli.returncode == exitcodes.CANNOT_RUN == printed["exit_code"]
    jsonschema.validate(printed, schema)
    assert CheckResult.model_validate({k: v for k, v in printed.items() if k != "exit_code"}).as_dict() == printed

    c = make_client(h200_store)
    body = c.get(f"/check.json?target={H200}&backend=cupti&mode=periodic_flushing").json()
    jsonschema.validate(body, schema)
    assert (body["verdict"], body["cause"]) == (printed["verdict"], printed["cause"]) == ("cannot_run",
                                                                                          "mode_refused")
    spec = c.get("/openapi.json").json()
    ref = spec["paths"]["/check.json"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    name = ref.rsplit("/", 1)[1]
    assert name.startswith("CheckResult")
    documented = spec["components"]["schemas"][name]
    assert set(documented["properties"]) == set(schema["properties"])
    assert documented["required"] == schema["required"]
    for key in ("verdict", "cause"):  # the enums are the model's, not a copy
        assert spec["components"]["schemas"][key.capitalize()]["enum"] == \
            [str(x) for x in (Verdict if key == "verdict" else Cause)]
    jsonschema.validate(body, {**documented, "components": spec["components"]},
                        cls=jsonschema.Draft202012Validator)
