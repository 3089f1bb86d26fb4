"""Answers shared by the handlers: business refusals, and answering a command once.

``once`` is the idempotent-command pattern of the ERP: the first delivery of a key computes its answer (a typed
result, or a business ``Refused``) and stores it in the inbox, with the request's digest
(``erpilot_platform.idempotency``), in the same transaction as its effects; every later delivery of that key is
given the same answer (or refused with ``operation_conflict`` if it asks for something else). A refusal is
stored too: a redelivered command whose first answer reached its caller must not succeed the second time (a
prepare refused at first and accepted on a redelivery would ask for an approval of a call its agent already
finished). An ``InvalidMessage`` (the message may not be acted on at all) is never stored: it rolls back.

The inbox keeps the answer as the ``ReplyV1`` it is sent as, so rows written by earlier versions still answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from erpilot_contracts.base import ErrorV1, ReplyV1
from erpilot_contracts.erp.v1 import ToolResultV1
from erpilot_erp.domain.errors import BusinessError, ErrorCode
from erpilot_erp.service_layer.ports import Work
from erpilot_platform.idempotency import Decision, decide, request_digest
from erpilot_platform.refusals import InvalidMessage, Refused
from erpilot_platform.tool_arguments import normalised_arguments

M = TypeVar("M", bound=BaseModel)


def business_status(exc: BusinessError) -> int:
    """HTTP status of a business rejection: 404 for a missing object, 409 for every other rule."""
    return 404 if exc.code == ErrorCode.NOT_FOUND else 409


def business_error(exc: BusinessError) -> dict[str, Any]:
    """The stored ``ErrorV1`` body of a rejected commit."""
    return ErrorV1(code=exc.code, message=exc.message, status=business_status(exc),
                   details=exc.details or None).model_dump(mode="json")


def business_refusal(exc: BusinessError) -> Refused:
    return Refused(exc.code, exc.message, business_status(exc), **exc.details)


def rejected_tool(exc: BusinessError) -> ToolResultV1:
    """A draft tool's business failure: HTTP 200 with ``outcome: business_rejected`` (SPEC §2)."""
    return ToolResultV1(outcome="business_rejected",
                        error=ErrorV1(code=exc.code, message=exc.message, status=200, details=exc.details or None))


def normalised(tool: str, arguments: Any) -> dict[str, Any]:
    """The tool's normalised arguments; ``unknown_tool`` / ``invalid_arguments`` (422) refused."""
    return normalised_arguments(tool, arguments)


def legacy_request_print(request: dict[str, Any]) -> str:
    """The unversioned digest inbox rows stored before ``request_digest``: a command stored then and
    redelivered after the upgrade is still a repeat."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()


def answered(result: M | Refused) -> M:
    """The answer ``once`` gave, for the handler to return: a refusal is raised (after its transaction committed,
    so the stored answer stays)."""
    if isinstance(result, Refused):
        raise result
    return result


async def once(unit: Work, key: str, asked: dict[str, Any], model: type[M],
               compute: Callable[[], Awaitable[M]]) -> M | Refused:
    """Answer ``key`` once in ``unit``: compute and store the answer the first time, give it again afterwards.

    ``asked`` holds what the command asks for (I-JSON), to tell a redelivery from another use of the key;
    ``model`` is the answer's type. A business refusal is returned (stored), never raised, so the transaction
    that stores it commits; pass the result through ``answered``.
    """
    digest = request_digest(asked)
    claimed, recorded = await unit.claim(key)
    if not claimed and recorded is None:  # the claim and the answer are written in one transaction
        raise RuntimeError(f"inbox key {key} has no recorded answer")
    stored = None if claimed else recorded["request"]
    match decide(stored, digest, legacy=lambda: legacy_request_print(asked)):
        case Decision.CONFLICT:
            return Refused("operation_conflict", f"{key} was already used for another request", 409)
        case Decision.REPEAT:
            reply = ReplyV1.model_validate(recorded["reply"])
            return model.model_validate(reply.data or {}) if reply.ok else Refused.of(reply)
    try:
        result: M | Refused = await compute()
    except InvalidMessage:
        raise
    except Refused as refusal:
        result = refusal
    reply = result.reply() if isinstance(result, Refused) else ReplyV1.success(result)
    await unit.record(key, {"request": digest, "reply": reply.model_dump(mode="json")})
    return result
