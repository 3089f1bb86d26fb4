"""The gateway's edge: every request is checked here before it is routed, authenticated or parsed.

- a body over ``MAX_BODY_BYTES`` (1 MiB) is 413 ``payload_too_large`` (by ``Content-Length`` before a
  byte is read; a chunked body is read up to the limit and no further);
- a JSON body (``application/json``, ``*+json`` or no content type: what FastAPI would parse as JSON)
  goes through ``erpilot_contracts.json_input.loads``: 400 ``invalid_json`` for malformed JSON,
  duplicate keys, lone surrogates, ``NaN`` or nesting deeper than 64; 422 ``invalid_arguments`` for
  integers outside the signed 64-bit range or NUL characters;
- a NUL character in the path or a query parameter is 422 ``invalid_arguments``.

A refused request is answered with problem+json and reaches no route, so it changes nothing. A body
that passes is handed on unchanged, and FastAPI parses it as usual.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from erpilot_contracts import json_input
from erpilot_gateway.problems import problem_response

MAX_BODY_BYTES = 1024 * 1024


class BodyTooLarge(Exception):
    pass


class InputGuard:
    """Pure ASGI middleware (no BaseHTTPMiddleware: streaming responses such as SSE pass through)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES):
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        try:
            _check_url(scope)
            declared = headers.get("content-length")
            if declared is not None and declared.strip().isdigit() and int(declared) > self.max_body_bytes:
                raise BodyTooLarge
            body = await self._read_body(receive)
            if body and _is_json(headers.get("content-type")):
                json_input.loads(body)
        except BodyTooLarge:
            await self._refuse(scope, receive, send, 413, "payload_too_large",
                               f"the body exceeds {self.max_body_bytes} bytes")
            return
        except json_input.BadInput as exc:
            await self._refuse(scope, receive, send, exc.status, exc.code, str(exc))
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read_body(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, code: str, detail: str) -> None:
        response = problem_response(status, code, detail, scope.get("path"))
        if status == 413:
            response.headers["Connection"] = "close"  # the rest of the body is not read
        await response(scope, receive, send)


def _check_url(scope: Scope) -> None:
    if "\x00" in scope.get("path", ""):
        raise json_input.InvalidValue("the path contains a NUL character")
    query = scope.get("query_string", b"").decode("latin-1")
    for key, value in parse_qsl(query, keep_blank_values=True):
        if "\x00" in key or "\x00" in value:
            raise json_input.InvalidValue(f"the query parameter {key!r} contains a NUL character")


def _is_json(content_type: str | None) -> bool:
    """The bodies FastAPI reads as JSON: no content type, ``application/json`` or ``application/*+json``."""
    if not content_type:
        return True
    media_type = content_type.split(";")[0].strip().lower()
    return media_type == "application/json" or (media_type.startswith("application/")
                                                 and media_type.endswith("+json"))


def _replay(body: bytes, receive: Receive) -> Receive:
    """Hand the body already read to the app, then pass on whatever comes next (a disconnect)."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
