"""Hostile inputs for the bad-input tests (SPEC §9) and a snapshot of everything the services store."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time

import asyncpg

MIB = 1024 * 1024
INVALID_JSON = (400, "invalid_json")
INVALID_ARGUMENTS = (422, "invalid_arguments")
TOO_LARGE = (413, "payload_too_large")

# Raw bodies that break JSON itself or hold a value no service can store: refused the same way on
# every route that takes a body, whatever its schema.
HOSTILE_JSON: list[tuple[str, bytes, tuple[int, str]]] = [
    ("duplicate keys", b'{"tool": "search_products", "tool": "submit_order", "arguments": {"query": "x"}}',
     INVALID_JSON),
    ("nested duplicate keys", b'{"arguments": {"sku": "A", "sku": "B"}, "text": "x"}', INVALID_JSON),
    ("lone surrogate", b'{"text": "\\ud800", "title": "\\udfff"}', INVALID_JSON),
    ("65 levels", b'{"arguments": ' + b"[" * 64 + b"]" * 64 + b"}", INVALID_JSON),
    ("100000 levels", b"[" * 100_000 + b"]" * 100_000, INVALID_JSON),
    ("NaN", b'{"price_minor": NaN, "fingerprint": "x", "arguments": {}}', INVALID_JSON),
    ("truncated", b'{"text": "x"', INVALID_JSON),
    ("not UTF-8", b'{"text": "\xff\xfe"}', INVALID_JSON),
    ("beyond int64", b'{"price_minor": 9223372036854775808, "arguments": {"qty": 9223372036854775808}}',
     INVALID_ARGUMENTS),
    ("5000 digits", b'{"price_minor": ' + b"9" * 5000 + b"}", INVALID_ARGUMENTS),
    ("NUL in text", b'{"text": "a\\u0000b", "title": "\\u0000", "comment": "\\u0000", "action": "reject",'
                    b' "fingerprint": "x", "tool": "x", "arguments": {}}', INVALID_ARGUMENTS),
    ("NUL in a key", b'{"arguments": {"\\u0000": 1}}', INVALID_ARGUMENTS),
    ("over 1 MiB", b'{"text": "' + b"x" * MIB + b'"}', TOO_LARGE),
]

# Hostile values inside an otherwise well-formed body of one route: (method, path template, body).
# ``{sid}``, ``{pid}`` and ``{fp}`` are a real session, a real pending approval and its fingerprint.
TWO_53 = 2**53
HOSTILE_VALUES: list[tuple[str, str, dict, tuple[int, str]]] = [
    ("POST", "/v1/sessions/{sid}/tool-calls",
     {"tool": "refund_payment", "arguments": {"order_id": "O-1", "amount_minor": TWO_53, "currency": "EUR",
                                              "channel": "original"}}, INVALID_ARGUMENTS),
    ("POST", "/v1/sessions/{sid}/tool-calls",
     {"tool": "create_order_draft", "arguments": {"customer_id": "C-1001", "lines": [{"sku": "S", "qty": -TWO_53}]}},
     INVALID_ARGUMENTS),
    ("POST", "/v1/sessions/{sid}/tool-calls",
     {"tool": "get_draft", "arguments": {"draft_id": "D-1", "revision": TWO_53 + 1}}, INVALID_ARGUMENTS),
    ("POST", "/v1/sessions/{sid}/tool-calls",
     {"tool": "cancel_order", "arguments": {"order_id": "O-1", "reason": "x\x00"}}, INVALID_ARGUMENTS),
    ("POST", "/v1/sessions/{sid}/tool-calls",  # within 1 MiB, but more than a NATS message may carry
     {"tool": "search_products", "arguments": {"query": "x" * (MIB - 200)}}, TOO_LARGE),
    ("POST", "/v1/approvals/{pid}/edit",
     {"fingerprint": "{fp}", "arguments": {"sku": "SKU-PAPER-A4", "delta": TWO_53, "reason": "x"}},
     INVALID_ARGUMENTS),
    ("POST", "/v1/approvals/{pid}/edit", {"fingerprint": "{fp}", "arguments": {"x": "y" * (MIB - 200)}}, TOO_LARGE),
    ("POST", "/v1/approvals/{pid}/decision", {"action": "approve", "fingerprint": "{fp}", "comment": "\x00"},
     INVALID_ARGUMENTS),
    ("PATCH", "/v1/erp/products/SKU-PAPER-A4", {"price_minor": 2**63}, INVALID_ARGUMENTS),
    ("POST", "/v1/sessions/{sid}/messages", {"text": "hello\x00"}, INVALID_ARGUMENTS),
    ("POST", "/v1/sessions", {"title": "\x00"}, INVALID_ARGUMENTS),
]

HOSTILE_URLS = [
    "/v1/erp/products?q=%00", "/v1/erp/customers?q=a%00b", "/v1/erp/products/SKU%00",
    "/v1/erp/drafts/D-1?revision=99999999999999999999", "/v1/erp/drafts/D-1?revision=1099511627776",
    "/v1/approvals?session_id=%00", "/v1/sessions/%00", "/v1/operations/op%00",
]


def fill(value, ids: dict[str, str]):
    """``value`` with ``{sid}``-style placeholders replaced, in strings at any depth."""
    if isinstance(value, str):
        return re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), m.group(0)), value)
    if isinstance(value, dict):
        return {k: fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, ids) for v in value]
    return value


def encode(body: dict) -> bytes:
    return json.dumps(body).encode()


class Snapshots:
    """One digest per table of every service schema (any insert, update or delete changes it), over one
    connection kept open on a loop of its own, so a test may take hundreds of them."""

    def __init__(self, database_url: str):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._conn = self._run(asyncpg.connect(re.sub(r"^postgres(ql)?\+\w+://", "postgresql://", database_url)))
        self._query: str | None = None

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=60)

    async def _take(self) -> dict[str, str]:
        if self._query is None:  # every table, those of migrations added later included
            tables = await self._conn.fetch(
                "select table_schema, table_name from information_schema.tables"
                " where table_schema in ('agent', 'approval', 'erp') and table_type = 'BASE TABLE'"
                " and table_name <> 'alembic_version' order by 1, 2")
            self._query = " union all ".join(
                f"select '{r['table_schema']}.{r['table_name']}' as name, count(*)::text || ':' ||"
                f" coalesce(md5(string_agg(t::text, '|' order by t::text)), '') as digest"
                f" from \"{r['table_schema']}\".\"{r['table_name']}\" t" for r in tables)
        return {row["name"]: row["digest"] for row in await self._conn.fetch(self._query)}

    def take(self) -> dict[str, str]:
        return self._run(self._take())

    def settled(self, timeout: float = 30.0) -> dict[str, str]:
        """A snapshot once every outbox is drained: the relay deletes a row after it is published, so an
        earlier request's event must be gone before a comparison starts."""
        deadline = time.monotonic() + timeout
        while True:
            digests = self.take()
            if all(d.startswith("0:") for name, d in digests.items() if name.endswith(".outbox")):
                return digests
            if time.monotonic() > deadline:
                raise AssertionError(f"the outboxes did not drain within {timeout}s: {digests}")
            time.sleep(0.05)

    def close(self) -> None:
        self._run(self._conn.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
