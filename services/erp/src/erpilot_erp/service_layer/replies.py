"""Answers shared by the handlers: business rejections, bad arguments, and answering a command once.

``once`` is the idempotent-command pattern of the ERP: the first delivery of a key computes its answer
and stores it in the inbox in the same transaction as its effects; every later delivery of that key is
answered from the inbox (or refused with ``operation_conflict`` if it asks for something else).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from erpilot_contracts.base import ErrorV1, ReplyV1
from erpilot_contracts.erp.v1 import ToolResultV1
from erpilot_erp.domain.errors import BusinessError, ErrorCode
from erpilot_erp.service_layer.ports import LedgerUnitOfWork


def business_status(exc: BusinessError) -> int:
    """HTTP status of a business rejection: 404 for a missing object, 409 for every other rule."""
    return 404 if exc.code == ErrorCode.NOT_FOUND else 409


def business_error(exc: BusinessError) -> dict[str, Any]:
    """The stored ``ErrorV1`` body of a rejected commit."""
    return ErrorV1(code=exc.code, message=exc.message, status=business_status(exc),
                   details=exc.details or None).model_dump(mode="json")


def business_failure(exc: BusinessError) -> ReplyV1:
    return ReplyV1.failure(exc.code, exc.message, business_status(exc), **exc.details)


def rejected_tool(exc: BusinessError) -> ToolResultV1:
    """A draft tool's business failure: HTTP 200 with ``outcome: business_rejected`` (SPEC §2)."""
    return ToolResultV1(outcome="business_rejected",
                        error=ErrorV1(code=exc.code, message=exc.message, status=200, details=exc.details or None))


def request_print(**request: Any) -> str:
    """A stable digest of what a command asked for, to tell a redelivery from a conflicting reuse of a key."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()


async def once(uow: LedgerUnitOfWork, key: str, asked: str,
               compute: Callable[[], Awaitable[ReplyV1]]) -> ReplyV1:
    """Answer ``key`` once in ``uow``: compute and store the answer the first time, replay it afterwards."""
    claimed, recorded = await uow.claim(key)
    if not claimed:
        if recorded is None:  # the claim and the answer are written in one transaction
            raise RuntimeError(f"inbox key {key} has no recorded answer")
        if recorded["request"] != asked:
            return ReplyV1.failure("operation_conflict", f"{key} was already used for another request", 409)
        return ReplyV1.model_validate(recorded["reply"])
    reply = await compute()
    await uow.record(key, {"request": asked, "reply": reply.model_dump(mode="json")})
    return reply
