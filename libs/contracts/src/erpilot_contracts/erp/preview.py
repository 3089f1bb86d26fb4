"""The ledger's preview of a write (schema_version 1): what a person sees before approving. Its own module, as
the approval contracts carry it too (``RequestApprovalV1``, ``ApprovalRecordV1``) and ``erp.v1`` imports those."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import (
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    Strict,
    ValidationInfo,
    model_validator,
)

from erpilot_contracts.base import Message


class _PreviewPart(Message):
    """A part of the ledger's preview. It travels (to the approval service, into its JSON columns, to people) as
    the ERP wrote it: fields a newer ERP added are kept and passed on (``extra="allow"``: the ledger signed them,
    and dropping them would change what it signed), and no ``schema_version`` is written inside a preview."""

    model_config = ConfigDict(extra="allow", frozen=True)

    schema_version: int = Field(1, exclude=True, description="Not written: a preview is versioned by its message.")


class PreviewEffectV1(_PreviewPart):
    label: str
    before: Any = None
    after: Any = None
    unit: str | None = Field(
        None, description="`pcs` for quantities; an ISO-4217 code when before/after are minor units of money; "
                          "None for a state (e.g. an order status).")


class PreviewV1(_PreviewPart):
    """What a person sees before approving: operation, object, amount, target, effects before -> after.

    A preview parsed from JSON (a message off the wire) remembers that JSON (``as_received``): the ledger signed
    its approval request over the preview as it wrote it, and what this service's model would write back can
    differ (a default a newer contract added and the sender did not write), so the signature is checked over the
    received JSON, as long as the typed preview is still exactly what that JSON parses to."""

    operation: str = Field(description="Human title of the operation, e.g. 'Submit order'.")
    object: str = Field(description="What is acted on, e.g. 'Draft D-1002 revision 3'.")
    target: str = Field(description="Who or what is affected, e.g. the customer's full name.")
    amount_minor: Annotated[int, Strict()] | None = Field(
        None, description="Minor units of `currency`; an integer only (a number of another kind, or a string, is "
                          "refused, never read as no amount: an amount rule's stricter roles depend on it).")
    currency: str | None = None
    effects: list[PreviewEffectV1] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict, description="Tool-specific data, e.g. draft lines.")

    _received: dict[str, Any] | None = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_received(cls, data: Any, handler: ModelWrapValidatorHandler[PreviewV1],
                       info: ValidationInfo) -> PreviewV1:
        preview = handler(data)
        if info.mode == "json" and isinstance(data, dict):
            preview._received = data
        return preview

    def as_received(self) -> dict[str, Any]:
        """The JSON this preview was parsed from, when it was parsed from JSON and is still what that JSON parses
        to (a copy with changes is not); else the JSON it writes."""
        received = self._received
        if received is not None and PreviewV1.model_validate_json(json.dumps(received)) == self:
            return received
        return self.model_dump(mode="json")
