"""HTTP request bodies: strict, unknown fields rejected (422).

Hostile JSON never reaches these models (``input_guard``); tool arguments are also held to what can be
fingerprinted (``CanonicalArguments``: integers within ±(2^53-1), else 422 ``invalid_arguments``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from erpilot_contracts.json_input import CanonicalArguments


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class CreateSessionBody(Body):
    title: Annotated[str, Field(max_length=200)] | None = None


class PostMessageBody(Body):
    text: Annotated[str, Field(min_length=1, max_length=20_000)]


class ToolCallBody(Body):
    tool: Annotated[str, Field(min_length=1, max_length=64)]
    arguments: CanonicalArguments
    call_id: Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$")] | None = None
    # A write's: why, in the agent's words (at most REASON_LIMIT characters: routes/sessions.py answers 422
    # reason_too_long). Not an argument: outside the fingerprint, shown to the approver as the agent's claim.
    reason: str | None = None


REASON_LIMIT = 500


class DecisionBody(Body):
    """Exactly one of three actions, as a JSON string; the fingerprint the person was shown.

    Every field is a string or absent: ``true``, ``"false"``, ``"Approve"``, ``null`` or a list is 422,
    like a missing ``action``/``fingerprint`` or any other field (routes/approvals.py also refuses
    duplicate keys and non-JSON constants before this model sees the body).
    """

    action: Literal["approve", "reject", "cancel"]
    fingerprint: Annotated[str, Field(min_length=1, max_length=200)]
    # Absent means no comment; an explicit null is a non-string and refused (the default is not validated).
    comment: Annotated[str, Field(max_length=2000)] = None  # type: ignore[assignment]


class DecisionItem(Body):
    pending_id: Annotated[str, Field(min_length=1, max_length=100)]
    fingerprint: Annotated[str, Field(min_length=1, max_length=200)]


class BulkDecisionBody(Body):
    """One action on 1-100 approvals, each with the fingerprint the person was shown: all or none."""

    action: Literal["approve", "reject", "cancel"]
    items: Annotated[list[DecisionItem], Field(min_length=1, max_length=100)]
    comment: Annotated[str, Field(max_length=2000)] = None  # type: ignore[assignment]


class EditBody(Body):
    """The fingerprint the person was shown and the complete new arguments (validated by the approval
    service against the same tool's schema)."""

    fingerprint: Annotated[str, Field(min_length=1, max_length=200)]
    arguments: CanonicalArguments


class ProductPatchBody(Body):
    price_minor: Annotated[int, Field(ge=0)] | None = None
    status: Literal["active", "discontinued"] | None = None


class DelegationBody(Body):
    """Let ``to`` decide with your roles until ``until`` (ISO 8601 with a time zone), for ``tools`` (absent: every
    write tool)."""

    to: Annotated[str, Field(min_length=1, max_length=200)]
    # The one non-string value of a JSON body here: an ISO 8601 string parsed as a datetime (not strict), then
    # held to carry its zone (routes/delegations.py).
    until: Annotated[datetime, Field(strict=False)]
    tools: Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]],
                     Field(min_length=1, max_length=20)] | None = None

    @field_validator("until", mode="before")
    @classmethod
    def _iso_text(cls, value: object) -> object:
        if not isinstance(value, str):  # lax datetime parsing would take a number as a Unix time
            raise ValueError("until is an ISO 8601 date and time with a zone, as a string")
        return value
