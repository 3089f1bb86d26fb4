"""RFC 9457 problem+json responses with the extra member ``code`` (SPEC §5)."""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from erpilot_contracts.base import ErrorV1
from erpilot_contracts.json_input import BadInput

PROBLEM_JSON = "application/problem+json"


class Problem(Exception):
    """Raise anywhere in a route to answer with problem+json."""

    def __init__(self, status: int, code: str, detail: str, **extra: Any):
        super().__init__(detail)
        self.status, self.code, self.detail, self.extra = status, code, detail, extra

    @classmethod
    def from_error(cls, error: ErrorV1) -> Problem:
        return cls(error.status, error.code, error.message, **(error.details or {}))


def problem_response(status: int, code: str, detail: str, instance: str | None = None, **extra: Any) -> JSONResponse:
    body = {"type": f"https://erpilot.dev/problems/{code}", "title": HTTPStatus(status).phrase,
            "status": status, "detail": detail, "code": code}
    if instance:
        body["instance"] = instance
    body.update(extra)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


_DEFAULT_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                  405: "method_not_allowed", 409: "conflict", 422: "invalid_body"}


def install(app: FastAPI) -> None:
    """Route every error through problem+json."""

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(exc.status, exc.code, exc.detail, request.url.path, **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_problem(request, exc.errors())

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _DEFAULT_CODES.get(exc.status_code, "error")
        return problem_response(exc.status_code, code, str(exc.detail), request.url.path)


def _validation_problem(request: Request, errors: Sequence[Any]) -> JSONResponse:
    """422 ``invalid_body``, or the code of the edge check that refused a value (``invalid_arguments``)."""
    items = [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in errors]
    refused = [e["ctx"]["error"] for e in errors if isinstance(e.get("ctx", {}).get("error"), BadInput)]
    if refused:
        return problem_response(refused[0].status, refused[0].code, str(refused[0]), request.url.path, errors=items)
    return problem_response(422, "invalid_body", "The request body is not valid.", request.url.path, errors=items)
