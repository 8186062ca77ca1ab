"""The report contract: one vocabulary, a published schema kept in step, clear errors."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from probes import outcomes as O
from survey.evidence import report
from survey.evidence.report import ReportError, parse_report
from tests.conftest import REPORTS, report_bytes

SCHEMA = Path(__file__).resolve().parents[1] / "schema" / "probe-report.v3.schema.json"


def test_vocabularies_match_the_probe() -> None:
    assert typing.get_args(report.Outcome) == O.OUTCOMES
    assert typing.get_args(report.Backend) == O.BACKENDS
    assert typing.get_args(report.FactStatus) == O.FACT_STATUSES


def test_published_schema_is_generated_from_the_model() -> None:
    assert json.loads(SCHEMA.read_text()) == json.loads(json.dumps(report.json_schema(), sort_keys=True))


@pytest.mark.parametrize("path", sorted(REPORTS.glob("*.json")), ids=lambda p: p.name)
def test_every_real_report_validates(path: Path) -> None:
    model, data = parse_report(path.read_bytes())
    assert model.schema_version == (3 if "schema3" in path.name else 2 if "sm90" in path.name else 1)
    assert {m.outcome for m in model.modes} <= set(O.OUTCOMES)


def test_errors_name_the_field() -> None:
    data = json.loads(report_bytes("cpu-triton-3.8.0.json"))
    data["modes"][3]["outcome"] = "probably_fine"
    with pytest.raises(ReportError) as e:
        parse_report(json.dumps(data))
    assert e.value.field == "modes.3.outcome"
    del data["registry"]
    with pytest.raises(ReportError, match="registry"):
        parse_report(json.dumps(data))
    with pytest.raises(ReportError, match="not JSON"):
        parse_report(b"{nope")
    with pytest.raises(ReportError) as e:
        parse_report(json.dumps({**json.loads(report_bytes("cpu-triton-3.8.0.json")), "schema_version": 4}))
    assert e.value.field == "schema_version"


def test_hash_ignores_formatting_only() -> None:
    data = json.loads(report_bytes("cpu-triton-3.8.0.json"))
    assert report.report_hash(data) == report.report_hash(json.loads(json.dumps(data, indent=4)))
    data["probe"]["duration_s"] += 1
    assert report.report_hash(data) != report.report_hash(json.loads(report_bytes("cpu-triton-3.8.0.json")))


def test_records_are_declared_once_and_held_against_the_model() -> None:
    """probes/records.py declares each record; the pydantic models read exactly those fields."""
    from probes import records

    models = {"attempt": report.Attempt, "mode_result": report.ModeResult, "platform": report.Platform,
              "origin": report.Origin, "recorded": report.Recorded, "capture": report.CaptureResult,
              "option_result": report.OptionResult}
    assert set(models) == set(records.RECORDS)
    for name, model in models.items():
        assert tuple(model.model_fields) == records.fields(name), name
        optional = {f for f, info in model.model_fields.items() if not info.is_required()}
        assert set(records.OPTIONAL.get(name, ())) <= optional, name
    with pytest.raises(KeyError, match="undeclared"):
        records.make("platform", key="x", vendor="none", model=None, arch=None, driver=None, runtime=None,
                     devices=[], errors=[], colour="blue")
    with pytest.raises(KeyError, match="missing"):
        records.make("attempt", outcome="ok")


@pytest.mark.parametrize("inner", ["{}", "[]"])
def test_a_report_may_nest_as_deep_as_max_depth_and_no_deeper(inner: str) -> None:
    """The report object is level 0: a container at level MAX_DEPTH is read, one at level
    MAX_DEPTH + 1 is refused by name (the quick depth walk hands both to the full one)."""
    data = json.loads(report_bytes("cpu-triton-3.9.0.json"))

    def with_depth(levels: int) -> str:  # a container at level ``levels`` under the report
        doc = dict(data)
        python = {**data["environment"]["python"], "deep": "@"}  # environment: 1, python: 2, deep's value: 3
        doc["environment"] = {**data["environment"], "python": python}
        opening, closing = "[" * (levels - 3), "]" * (levels - 3)
        return json.dumps(doc).replace('"@"', opening + inner + closing)

    parse_report(with_depth(report.MAX_DEPTH - 1))
    parse_report(with_depth(report.MAX_DEPTH))
    with pytest.raises(ReportError, match=f"nested more than {report.MAX_DEPTH} levels deep"):
        parse_report(with_depth(report.MAX_DEPTH + 1))
