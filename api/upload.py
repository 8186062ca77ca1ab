"""``POST /runs``: upload one probe report.

- ``Authorization: Bearer <SURVEY_TOKEN>``, compared in constant time. Without
  it, or with another token: 401. A server started without a token accepts no
  uploads at all: 403.
- Bodies over the limit (``max_upload_bytes``, default 8 MiB) get 413: a
  Content-Length over it is refused before reading, and the body is counted
  while it is read (a chunked upload has no Content-Length).
- A report that is not UTF-8 JSON, or does not match the schema: 422, ``field``
  naming the first failing field (``modes.3.outcome``).
- The same report again: 200 with the run id it already has. A new one: 201
  with the new run id (``Location: /runs/{id}``).

``survey.ingest.ingest`` stores a report in one transaction, so nothing partial
is ever stored.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api import formats
from api.errors import ApiError
from api.schemas import ErrorResponse, UploadResponse
from db.store import Store
from survey.ingest import IngestResult, ingest

DEFAULT_MAX_UPLOAD_BYTES = 8 * 1024 * 1024
MAX_CANDIDATE = 200  # db.models.Candidate.name
MAX_LABEL = 400  # db.models.Candidate.label

bearer = HTTPBearer(auto_error=False, description="the server's SURVEY_TOKEN")
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="proton-survey"'}


def authorize(token: str | None, creds: HTTPAuthorizationCredentials | None) -> None:
    if not token:
        raise ApiError(403, "uploads_disabled", "this server accepts no uploads: it was started without a token",
                       hint="start it with SURVEY_TOKEN set (e.g. SURVEY_TOKEN=... survey serve) to accept uploads")
    if creds is None or not creds.credentials:
        raise ApiError(401, "unauthorized", "uploading needs the header `Authorization: Bearer <token>`",
                       headers=CHALLENGE)
    if not hmac.compare_digest(creds.credentials.encode("utf-8"), token.encode("utf-8")):
        raise ApiError(401, "unauthorized", "the token is not this server's", headers=CHALLENGE)


def too_large(limit: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"a report may be at most {limit} bytes", field="body",
                    hint="reports with kept capture artifacts can be large: drop the artifact content, or raise "
                         "the server's limit (SURVEY_MAX_UPLOAD_BYTES)")


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            n = int(declared)
        except ValueError:
            raise ApiError(400, "bad_request", f"Content-Length {declared!r} is not a number")
        if n > limit:
            raise too_large(limit)
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _param(value: str | None, field: str, limit: int) -> str | None:
    if value is None:
        return None
    if not value.strip() or len(value) > limit or any(ord(c) < 32 for c in value):
        raise ApiError(422, "invalid_input", f"{field}: 1 to {limit} printable characters", field=field)
    return value


def store_report(store: Store, raw: bytes, candidate: str | None, label: str | None) -> IngestResult:
    with store.session() as s:
        return ingest(s, raw, candidate=candidate, label=label, source="upload")


async def upload(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    candidate: Annotated[str | None, Query(description="store it under this candidate name (default: "
                                                       "HOST.DISTRIBUTION-VERSION from the report)")] = None,
    label: Annotated[str | None, Query(description="the candidate's docs label")] = None,
) -> Response:
    settings = request.app.state.settings
    authorize(settings.token, creds)
    raw = await read_body(request, settings.max_upload_bytes)
    candidate = _param(candidate, "candidate", MAX_CANDIDATE)
    label = _param(label, "label", MAX_LABEL)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(422, "invalid_report", f"not UTF-8 text: {e}", field=None)
    res = await run_in_threadpool(store_report, request.app.state.store, raw, candidate, label)
    url = f"/runs/{res.run_id}"
    body = {"run_id": res.run_id, "created": res.created, "candidate": res.candidate, "url": url}
    return Response(formats.json_bytes(body), status_code=201 if res.created else 200,
                    media_type="application/json", headers={"Location": url} if res.created else {})


def routes(router: APIRouter) -> None:
    err = {"model": ErrorResponse}
    router.add_api_route(
        "/runs", upload, methods=["POST"], name="upload", summary="Upload a probe report",
        description=__doc__, response_class=Response, status_code=201,
        responses={
            201: {"model": UploadResponse, "description": "stored as a new run"},
            200: {"model": UploadResponse, "description": "this exact report was already stored; nothing added"},
            401: {**err, "description": "no token, or not the server's token"},
            403: {**err, "description": "the server was started without a token: no uploads"},
            413: {**err, "description": "over the size limit"},
            422: {**err, "description": "not a valid probe report; `field` names the first failing field"},
        },
        openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
            "schema": {"type": "object", "description": "a probe report, schema version 1 (see /schema.json)"}}}}},
    )
