"""The OpenAPI document (``/openapi.json``), as strict as the API itself.

FastAPI builds it from the routes once. Two things are added here:

- the request body of ``POST /runs`` is the probe report's own JSON Schema
  (``survey.evidence.report.json_schema``, its ``$defs`` moved to
  ``components/schemas/ProbeReport_*``, integers bounded as uploads
  are: ``survey.evidence.report.parse_report(exact=True)``), so a client can validate before uploading,
  and its answers link to the stored run, report and candidate;
- the ``candidate`` filter of ``/matrix.*`` lists the stored candidate names as
  its ``enum`` (plus ``""``: any), since a name that is not stored is refused.
  The names change only on ingest, so the document is rebuilt per matrix
  version; with more than :data:`MAX_ENUM` candidates the enum is left out.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from api.upload import INT_MAX, INT_MIN
from probes import SCHEMA_VERSION
from survey.evidence.report import json_schema

MAX_ENUM = 1000
PREFIX = "ProbeReport_"


def _rewrite_refs(node: Any) -> Any:
    """References into components; every integer bounded (+-(2**53-1) unless the
    schema says less), as uploads are held to."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/"):
                out[k] = "#/components/schemas/" + PREFIX + v[len("#/$defs/"):]
            else:
                out[k] = _rewrite_refs(v)
        if out.get("type") == "integer":
            out.setdefault("minimum", INT_MIN)
            out.setdefault("maximum", INT_MAX)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(x) for x in node]
    return node


def report_components() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the report's schema, its definitions), with references pointing into components."""
    schema = copy.deepcopy(json_schema())
    defs = schema.pop("$defs", {})
    for key in ("$schema", "$id"):
        schema.pop(key, None)
    return _rewrite_refs(schema), {PREFIX + k: _rewrite_refs(v) for k, v in defs.items()}


def base(app: FastAPI) -> dict[str, Any]:
    """The document without stored names (built once per app)."""
    cached: dict[str, Any] | None = getattr(app.state, "openapi_base", None)
    if cached is not None:
        return cached
    doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    # Every invalid parameter is answered in the one error format (api.errors), never FastAPI's own.
    for ops in doc["paths"].values():
        for op in ops.values():
            bad = op.get("responses", {}).get("422", {}).get("content", {}).get("application/json", {})
            if "HTTPValidationError" in str(bad.get("schema", {})):
                op["responses"]["422"] = {"description": "a parameter is invalid (`field` names it)", "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}
    for name in ("HTTPValidationError", "ValidationError"):
        doc.get("components", {}).get("schemas", {}).pop(name, None)
    report, defs = report_components()
    doc.setdefault("components", {}).setdefault("schemas", {}).update(defs)
    upload = doc["paths"]["/runs"]["post"]
    upload["requestBody"]["content"]["application/json"]["schema"] = {
        **report, "description": f"a probe report, schema version {SCHEMA_VERSION} (also served at /schema.json)"}
    for status in ("200", "201"):  # where the stored run and its candidate are
        upload["responses"][status]["links"] = {
            "run": {"operationRef": "#/paths/~1runs~1{run_id}.json/get",
                    "parameters": {"run_id": "$response.body#/run_id"}, "description": "the stored run"},
            "report": {"operationRef": "#/paths/~1runs~1{run_id}~1report.json/get",
                       "parameters": {"run_id": "$response.body#/run_id"}, "description": "the report as stored"},
            "candidate": {"operationRef": "#/paths/~1candidates~1{name}.json/get",
                          "parameters": {"name": "$response.body#/candidate"},
                          "description": "the candidate it is stored under"},
        }
    app.state.openapi_base = doc
    return doc


def document(app: FastAPI, candidate_names: list[str], platform_keys: list[str] | None = None) -> dict[str, Any]:
    """The document with the stored candidate names and platform keys as the enums of
    the matrix's ``candidate`` and ``platform`` filters (a value not stored is refused)."""
    doc = copy.deepcopy(base(app))
    enums = {"candidate": candidate_names, "platform": platform_keys or []}
    for path, ops in doc["paths"].items():
        if not path.startswith("/matrix."):
            continue
        for p in ops["get"].get("parameters", []):
            values = enums.get(p["name"])
            if p["in"] == "query" and values is not None and len(values) <= MAX_ENUM:
                p["schema"] = {"type": "string", "enum": ["", *values]}
    return doc
