"""One error format for every route.

JSON (``.json``/``.csv``/``.md`` paths, the upload, ``/healthz``)::

    {"error": {"status": 404, "code": "not_found", "message": "...", "field": null, "hint": null}}

HTML routes (bare paths) render ``error.html`` with the same fields.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from api import formats, render
from db.outage import FULL, READ_ONLY, Problem, classify
from survey.core.errors import InputError, InvalidReport, SurveyError, UnknownTarget, UsageProblem

log = logging.getLogger("api")

CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    411: "length_required",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    500: "internal_error",
    503: "unavailable",
    507: "insufficient_storage",
}


class ApiError(Exception):
    """An answer that is an error; rendered in the shared format."""

    def __init__(
        self,
        status: int,
        code: str | None,
        message: str,
        *,
        field: str | None = None,
        hint: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.code = code or CODES.get(status, "error")
        self.message = message
        self.field = field
        self.hint = hint
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"status": self.status, "code": self.code, "message": self.message, "field": self.field,
                          "hint": self.hint}}


OUTAGE_STATUS = {FULL: (507, "insufficient_storage"), READ_ONLY: (403, "read_only_store")}


def outage_error(problem: Problem) -> ApiError:
    """The answer to a store outage (db.outage): 507 full, 403 read-only, else 503."""
    status, code = OUTAGE_STATUS.get(problem.kind, (503, "store_unavailable"))
    return ApiError(status, code, problem.message)


def from_survey_error(e: SurveyError) -> ApiError:
    if isinstance(e, UnknownTarget):
        return ApiError(404, "not_found", e.message, field=e.field, hint=e.hint)
    if isinstance(e, InvalidReport):
        return ApiError(422, "invalid_report", e.message, field=e.field, hint=e.hint)
    if isinstance(e, (InputError, UsageProblem)):
        return ApiError(422, "invalid_input", e.message, field=e.field, hint=e.hint)
    return ApiError(500, "survey_error", e.message, field=e.field, hint=e.hint)


def error_response(request: Request, err: ApiError) -> Response:
    headers = {"Cache-Control": "no-store", **err.headers}
    if formats.wants_html(request):
        html = render.page("error.html", {"error": err.body()["error"], "title": f"{err.status} {err.code}"})
        return formats.html_response(html, status=err.status, headers=headers)
    return Response(formats.json_bytes(err.body()), status_code=err.status, media_type="application/json",
                    headers=headers)


def install(app: FastAPI) -> None:
    """Route every kind of failure through :func:`error_response`."""

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(request, exc)

    async def survey_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, SurveyError)
        return error_response(request, from_survey_error(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        message = exc.detail if isinstance(exc.detail, str) else CODES.get(exc.status_code, "error")
        if exc.status_code == 404 and message == "Not Found":
            message = f"nothing at {request.url.path}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        return error_response(request, ApiError(exc.status_code, None, message, headers=dict(exc.headers or {})))

    async def validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(x) for x in first.get("loc", ())]
        if loc and loc[0] in ("query", "path", "header", "body"):
            loc = loc[1:]
        field = ".".join(loc) or None
        msg = first.get("msg", "invalid request")
        return error_response(request, ApiError(422, "invalid_input", f"{field}: {msg}" if field else msg,
                                                field=field))

    async def store_error(request: Request, exc: Exception) -> Response:
        problem = classify(exc, request.app.state.store.describe())
        if problem is None:
            raise exc  # not an outage: the server's own 500 (api.errors.unexpected)
        log.warning("%s %s: %s", request.method, request.url.path, problem.message)
        return error_response(request, outage_error(problem))

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(request, ApiError(500, "internal_error",
                                                "the server failed to answer this request; see its log"))

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(SurveyError, survey_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(SQLAlchemyError, store_error)
    app.add_exception_handler(Exception, unexpected)
