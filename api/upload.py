"""``POST /runs``: upload one probe report.

- ``Authorization: Bearer <SURVEY_TOKEN>``, compared in constant time. Without
  it, or with another token: 401. A server started without a token accepts no
  uploads at all: 403.
- Bodies over the limit (``max_upload_bytes``, default 8 MiB) get 413: a
  Content-Length over it is refused before reading, and the body is counted
  while it is read (a chunked upload has no Content-Length).
- A report that is not UTF-8 JSON, or does not match the schema: 422, ``field``
  naming the first failing field (``modes.3.outcome``). The upload holds a
  report to its JSON Schema exactly (``parse_report(exact=True)``): JSON types as
  declared (no ``false`` for a number, no ``"1"`` for an integer) and integers
  within the bounds ``/openapi.json`` gives them.
- A body that has not arrived whole within ``body_timeout`` seconds (default
  60; ``$SURVEY_BODY_TIMEOUT``): 408, and the connection is closed. A client
  that goes away mid-upload is let go quietly (nothing stored, nothing logged).
- ``candidate`` and ``label`` follow :mod:`api.names` (no control, bidi or
  invisible characters; 1 to 200 and 400 characters): 422 naming the field.
- The same report again: 200 with the run id it already has and a ``note``
  saying under which candidate it is stored (the ``candidate`` asked for is not
  used: a report is stored once). A new one: 201 with the new run id
  (``Location: /runs/{id}``).

A report is stored whole or not at all, and answered once it is committed. Uploads
that arrive while another is being written are stored together, in one transaction
(``survey.flows.group_commit``); when that fails, each is stored again alone, so one
report's failure is its own answer.
"""

from __future__ import annotations

import hmac
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from api import formats, names
from api.errors import ApiError
from api.schemas import ErrorResponse, UploadResponse
from db import widths
from probes import SCHEMA_VERSION
from survey.environments.catalog import Catalog
from survey.evidence.ingest import IngestResult, identify
from survey.evidence.report import DEFAULT_MAX_REPORT_BYTES, MAX_INT
from survey.flows.filing import new_filing
from survey.flows.group_commit import GroupCommit
from survey.flows.writer import RemoteWriter, StoreReplacedMeanwhile, WriterGone

INT_MIN, INT_MAX = -MAX_INT, MAX_INT  # what every JSON reader holds exactly (survey.evidence.report.MAX_INT)

DEFAULT_MAX_UPLOAD_BYTES = DEFAULT_MAX_REPORT_BYTES
DEFAULT_BODY_TIMEOUT_S = 60.0
MAX_CANDIDATE = widths.NAME
MAX_LABEL = widths.LABEL

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


class ClientGone(Exception):
    """The client went away before its body arrived: there is no one to answer."""


async def read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The whole body, at most ``limit`` bytes, within ``timeout`` seconds in all
    (a deadline, not an idle timer: a body sent a byte at a time still ends)."""
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
    with anyio.move_on_after(timeout) as scope:
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise too_large(limit)
                chunks.append(chunk)
        except ClientDisconnect:
            raise ClientGone()
    if scope.cancelled_caught:
        raise ApiError(408, "request_timeout", f"the request body did not arrive within {timeout:g} s "
                       f"({size} bytes came)", field="body", headers={"Connection": "close"},
                       hint="send the report in one go (curl --data-binary @report.json); the server's limit is "
                            "SURVEY_BODY_TIMEOUT")
    return b"".join(chunks)


def store_report(writer: GroupCommit | RemoteWriter, raw: bytes, candidate: str | None, label: str | None,
                 catalog: Catalog) -> IngestResult:
    store = writer.store
    try:
        ident = identify(raw, exact=True)  # read once, before the store is touched
    except RecursionError:  # json.loads of arrays/objects nested past the interpreter's limit
        raise ApiError(422, "invalid_report", "not a probe report: JSON nested too deep to read")
    # the rules of `survey ingest`; a name given over HTTP is asked for, so it may be new
    filing = new_filing(ident, candidate=candidate, label=label, catalog=catalog)
    try:
        res = writer.store_report(ident, filing)  # with the uploads that wait beside it, once committed
    except StoreReplacedMeanwhile:
        raise replaced_meanwhile()
    except WriterGone as e:
        raise ApiError(503, "store_unavailable", str(e),
                       hint="send it again (a report stored already is answered 200 with its run); should this "
                            "go on, restart the server (survey serve)")
    if store.replaced():  # written into a file that is no longer the store's: not acknowledged
        raise replaced_meanwhile()
    return res


def replaced_meanwhile() -> ApiError:
    return ApiError(503, "store_replaced", "the store's file was replaced while this report was being stored; "
                    "it is not in the new file", hint="send it again")


def note(res: IngestResult, asked: str | None) -> str | None:
    if res.created:
        return None
    text = f"this report is already stored as run #{res.run_id} under candidate {res.candidate!r}; nothing was added"
    if asked is not None and asked != res.candidate:
        text += f" (the candidate asked for, {asked!r}, was not used: a report is stored once)"
    return text


async def upload(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    candidate: Annotated[str | None, Query(
        description="store it under this candidate name (default: HOST.DISTRIBUTION-VERSION from the report); "
                    f"1 to {MAX_CANDIDATE} characters, {names.RULE}",
        json_schema_extra={"minLength": 1, "maxLength": MAX_CANDIDATE, "pattern": names.PATTERN})] = None,
    label: Annotated[str | None, Query(
        description=f"the candidate's docs label; 1 to {MAX_LABEL} characters, {names.RULE}",
        json_schema_extra={"minLength": 1, "maxLength": MAX_LABEL, "pattern": names.PATTERN})] = None,
) -> Response:
    settings = request.app.state.settings
    authorize(settings.token, creds)
    if request.app.state.store.read_only:
        raise ApiError(403, "read_only_store", "this server's store is read-only: it accepts no uploads",
                       hint="serve a store this server may write to accept uploads")
    candidate = names.check(candidate, "candidate", MAX_CANDIDATE)
    label = names.check(label, "label", MAX_LABEL)
    try:
        raw = await read_body(request, settings.max_upload_bytes, settings.body_timeout_s)
    except ClientGone:
        return Response(status_code=400)  # never delivered: the client is gone
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(422, "invalid_report", f"not UTF-8 text: {e}", field=None)
    pool = request.app.state.pool
    res = await pool.run(store_report, request.app.state.writer, raw, candidate, label, request.app.state.catalog,
                         deadline_s=4 * pool.deadline_s)
    url = f"/runs/{res.run_id}"
    body = {"run_id": res.run_id, "created": res.created, "candidate": res.candidate, "url": url,
            "note": note(res, candidate)}
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
            403: {**err, "description": "the server was started without a token, or its store is read-only: "
                                        "no uploads"},
            503: {**err, "description": "the store cannot be reached, or its file was replaced meanwhile: "
                                        "nothing was stored; send it again"},
            507: {**err, "description": "the store's disk is full: nothing was stored"},
            400: {**err, "description": "a Content-Length that is not a number"},
            408: {**err, "description": "the body did not arrive within the server's time limit"},
            413: {**err, "description": "over the size limit"},
            422: {**err, "description": "not a valid probe report; `field` names the first failing field"},
        },
        openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
            "schema": {"type": "object",
                       "description": f"a probe report, schema version {SCHEMA_VERSION} (see /schema.json)"}}}}},
    )
