"""Base classes for every message on the wire."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Message(BaseModel):
    """A versioned internal message.

    Publishers validate strictly; consumers of internal messages tolerate added optional fields
    (``extra="ignore"``) so a producer can grow a message without breaking older consumers.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_version: int = Field(1, description="Version of this message's schema.")


class StrictBody(BaseModel):
    """An external input (tool arguments, HTTP bodies): unknown fields and coercions are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ErrorV1(BaseModel):
    """A failure as it travels between services and out to HTTP as problem+json."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    code: str = Field(description="Stable machine-readable code, e.g. `draft_changed`.")
    message: str = Field(description="Human-readable explanation.")
    status: int = Field(400, description="The HTTP status the gateway answers with.")
    details: dict[str, Any] | None = None


class ReplyV1(Message):
    """The answer to every request/reply exchange: `ok` with `data`, or an `error`."""

    ok: bool
    data: dict[str, Any] | None = None
    error: ErrorV1 | None = None

    @classmethod
    def success(cls, data: BaseModel | dict[str, Any]) -> ReplyV1:
        payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
        return cls(ok=True, data=payload)

    @classmethod
    def failure(cls, code: str, message: str, status: int = 400, **details: Any) -> ReplyV1:
        return cls(ok=False, error=ErrorV1(code=code, message=message, status=status, details=details or None))
