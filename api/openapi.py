"""The OpenAPI document (``/openapi.json``), as strict as the API itself.

FastAPI builds it from the routes once. Two things are added here:

- the request body of ``POST /runs`` is the probe report's own JSON Schema
  (``survey.report.json_schema``, its ``$defs`` moved to
  ``components/schemas/ProbeReport_*``), so a client can validate before
  uploading;
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

from survey.report import json_schema

MAX_ENUM = 1000
PREFIX = "ProbeReport_"


def _rewrite_refs(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/"):
                out[k] = "#/components/schemas/" + PREFIX + v[len("#/$defs/"):]
            else:
                out[k] = _rewrite_refs(v)
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
    cached = getattr(app.state, "openapi_base", None)
    if cached is not None:
        return cached
    doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    report, defs = report_components()
    doc.setdefault("components", {}).setdefault("schemas", {}).update(defs)
    upload = doc["paths"]["/runs"]["post"]
    upload["requestBody"]["content"]["application/json"]["schema"] = {
        **report, "description": "a probe report, schema version 1 (also served at /schema.json)"}
    app.state.openapi_base = doc
    return doc


def document(app: FastAPI, candidate_names: list[str]) -> dict[str, Any]:
    doc = base(app)
    if not candidate_names or len(candidate_names) > MAX_ENUM:
        return doc
    doc = copy.deepcopy(doc)
    for path, ops in doc["paths"].items():
        if not path.startswith("/matrix."):
            continue
        for p in ops["get"].get("parameters", []):
            if p["name"] == "candidate" and p["in"] == "query":
                p["schema"] = {"type": "string", "enum": ["", *candidate_names]}
    return doc
