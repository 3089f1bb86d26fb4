"""Hostile JSON, refused at every edge (SPEC §9, PITFALLS.md "Hostile JSON").

``json.loads`` merges duplicate keys (last wins), accepts lone surrogates and ``NaN``, turns ``1e400``
into infinity and recurses until ``RecursionError``; PostgreSQL refuses NUL in text and overflows
bigint at 2^63; RFC 8785 (the fingerprint) refuses integers beyond 2^53. ``loads`` parses an input
with all of that checked, so whatever it returns is safe to validate, store, publish and fingerprint
(except the 2^53 bound, which ``CanonicalJson`` adds where a digest is taken):

- ``InvalidJson`` (400 ``invalid_json``): not UTF-8 JSON, a duplicate key, a lone surrogate,
  ``NaN``/``Infinity``, nesting deeper than ``MAX_DEPTH``;
- ``InvalidValue`` (422 ``invalid_arguments``): an integer outside the signed 64-bit range, a number
  too large for a double, a NUL character in a string or a key.

The gateway runs ``loads`` on every HTTP body and each service's message parser on every NATS
message (``erpilot_platform.endpoints``), before anything is stored.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from pydantic import AfterValidator

MAX_DEPTH = 64
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
CANONICAL_INT_MAX = 2**53 - 1  # RFC 8785 (I-JSON): integers a double holds exactly


class BadInput(ValueError):
    """An input refused at the edge; ``code`` and ``status`` are what the caller is answered."""

    code = "bad_input"
    status = 400


class InvalidJson(BadInput):
    code = "invalid_json"
    status = 400


class InvalidValue(BadInput):
    code = "invalid_arguments"
    status = 422


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise InvalidJson(f"duplicate key {duplicate!r}")
    return result


def _no_constant(name: str) -> Any:
    raise InvalidJson(f"{name} is not JSON")


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > 19:  # before int(): a 10,000-digit number costs time and raises anyway
        raise InvalidValue("an integer is outside the signed 64-bit range")
    return int(text)


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidValue(f"the number {text[:40]} is too large")
    return value


def loads(raw: bytes | str) -> Any:
    """Parse ``raw`` as strict JSON and check every value (see the module docstring)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
    except UnicodeDecodeError as exc:
        raise InvalidJson(f"the body is not UTF-8: {exc.reason}") from None
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant,
                           parse_int=_integer, parse_float=_number)
    except BadInput:
        raise
    except RecursionError:  # far deeper than MAX_DEPTH; the C scanner unwinds cleanly
        raise InvalidJson(f"nesting deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise InvalidJson(f"not valid JSON: {exc}") from None
    check(value)
    return value


def check(value: Any) -> None:
    """Refuse what PostgreSQL, NATS or a JSON peer would choke on, anywhere in ``value`` (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise InvalidJson(f"nesting deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    _check_text(key)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            _check_text(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                raise InvalidValue("an integer is outside the signed 64-bit range")
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidValue("a number is not finite")


def _check_text(text: Any) -> None:
    if not isinstance(text, str):
        return
    if "\x00" in text:
        raise InvalidValue("text contains a NUL character")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidJson("a string contains a lone UTF-16 surrogate") from None


def unsafe_integer_path(value: Any) -> list[str | int] | None:
    """Where ``value`` holds an integer RFC 8785 cannot canonicalise (beyond ±(2^53-1)), if anywhere."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            stack.extend((child, [*path, key]) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, [*path, index]) for index, child in enumerate(item))
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > CANONICAL_INT_MAX:
            return path
    return None


def _canonical(value: Any) -> Any:
    check(value)
    path = unsafe_integer_path(value)
    if path is not None:
        loc = ".".join(map(str, path)) or "value"
        raise InvalidValue(f"{loc}: integers beyond ±(2^53-1) cannot be fingerprinted")
    return value


CanonicalJson = Annotated[Any, AfterValidator(_canonical)]
"""A JSON value that is fingerprinted (RFC 8785): checked like ``loads`` and integers within ±(2^53-1)."""
CanonicalArguments = Annotated[dict[str, Any], AfterValidator(_canonical)]
"""Tool arguments as they are fingerprinted: a JSON object checked like ``CanonicalJson``."""
