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
from tests.conftest import survey_cli
from tests.test_api import H200, gpu_store  # noqa: F401  (the fixture)

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
FIELDS = ("verdict", "cause")


def _is_field(n: ast.AST) -> bool:
    """``x.verdict``, ``x["verdict"]`` or ``x.get("verdict")`` (or cause)."""
    return (isinstance(n, ast.Attribute) and n.attr in FIELDS) or (
        isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value in FIELDS) or (
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and bool(n.args)
        and isinstance(n.args[0], ast.Constant) and n.args[0].value in FIELDS)


def _strings(n: ast.AST | None) -> list[tuple[int, str]]:
    return [(c.lineno, c.value) for c in ast.walk(n) if isinstance(c, ast.Constant) and isinstance(c.value, str)
            and c.value not in FIELDS] if n is not None else []


def spelled_verdicts(path: Path) -> list[tuple[int, str]]:
    """String constants used as a verdict or a cause: compared with one, assigned to one,
    passed as one (``verdict=``, ``cause=``, a Link's cause), or under such a key in a dict."""
    out: list[tuple[int, str]] = []
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Compare) and any(_is_field(x) for x in (n.left, *n.comparators)):
            out += [s for x in (n.left, *n.comparators) if not _is_field(x) for s in _strings(x)]
        elif isinstance(n, ast.Assign) and any(_is_field(t) for t in n.targets):
            out += _strings(n.value)
        elif isinstance(n, ast.Call):
            out += [s for k in n.keywords if k.arg in FIELDS for s in _strings(k.value)]
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            if name == "Link" and len(n.args) > 3:  # Link(link, answer, basis, cause, ...)
                out += _strings(n.args[3])
        elif isinstance(n, ast.Dict):
            out += [s for k, v in zip(n.keys, n.values, strict=True)
                    if isinstance(k, ast.Constant) and k.value in FIELDS for s in _strings(v)]
    return out


def host_modules() -> list[Path]:
    """survey/ and api/, but survey/aorta: a recipe cell's decision has a vocabulary of its own
    (conditional, exit 8; its links' causes), spelled in survey/aorta/links.py."""
    return sorted(p for p in [*(ROOT / "survey").rglob("*.py"), *(ROOT / "api").rglob("*.py")]
                  if "aorta" not in p.relative_to(ROOT).parts)


def test_no_verdict_or_cause_is_spelled_outside_its_enum() -> None:
    """Verdict, Cause (survey/verdicts/verdict.py) and the mode verdict Acceptance
    (survey/verdicts/modes.py) are named through their enums everywhere else."""
    words = {str(x) for enum in (Verdict, Cause, Acceptance) for x in enum}
    found = [f"{p.relative_to(ROOT)}:{line}: {s!r}" for p in host_modules()
             for line, s in spelled_verdicts(p) if s in words]
    assert found == []


def test_the_scan_finds_a_spelled_verdict(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('if r.verdict == "accepted":\n    pass\nx = {"cause": "no_gpu"}\nf(verdict="runs")\n'
                   'L.Link("start", NO, "b", "hung")\nres.cause = "mode_refused"\n')
    assert sorted(s for _, s in spelled_verdicts(bad)) == ["accepted", "hung", "mode_refused", "no_gpu", "runs"]


# --------------------------------------------------------------------------- one model, three faces
def test_cli_json_check_json_and_openapi_are_one_model(gpu_store: Any, make_client: Any) -> None:  # noqa: F811
    schema = CheckResult.model_json_schema(mode="serialization")
    cli = survey_cli("check", H200, "--backend", "cupti", "--mode", "periodic_flushing", "--json",
                     "--db", gpu_store.url)
    printed = json.loads(cli.stdout)
    assert cli.returncode == exitcodes.CANNOT_RUN == printed["exit_code"]
    jsonschema.validate(printed, schema)
    assert CheckResult.model_validate({k: v for k, v in printed.items() if k != "exit_code"}).as_dict() == printed

    c = make_client(gpu_store)
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
