"""Refusals a use case raises instead of building a reply: the entry point (``endpoints.ServiceBus``) turns
them into the ``ReplyV1`` failure, so handlers return typed results or raise, and only entry points speak wire.
"""

from __future__ import annotations

from typing import Any

from erpilot_contracts.base import ReplyV1


class Refused(Exception):
    """The request is refused with ``code`` (SPEC's codes), an HTTP-like ``status`` and ``details``; nothing changed
    (raised inside a unit of work, it rolls that back). A durable command is acknowledged: a redelivery would be
    refused the same way."""

    def __init__(self, code: str, message: str, status: int = 400, **details: Any):
        super().__init__(message)
        self.code, self.message, self.status, self.details = code, message, status, details

    def reply(self) -> ReplyV1:
        return ReplyV1.failure(self.code, self.message, self.status, **self.details)

    @classmethod
    def of(cls, reply: ReplyV1) -> Refused:
        """The refusal a failed ``ReplyV1`` carries (to re-raise an answer built the old way)."""
        error = reply.error
        return cls(error.code, error.message, error.status, **(error.details or {}))


class InvalidMessage(Refused):
    """The message may not be acted on at all (no valid requester assertion, a field no producer may send):
    answered ``invalid_message`` (422) with ``details.reason`` naming the rule, dead-lettered like a message
    that does not parse, and nothing is stored."""

    def __init__(self, reason: str, message: str, **details: Any):
        super().__init__("invalid_message", message, 422, reason=reason, **details)
        self.reason = reason
