"""ERP commands, queries and events (schema_version 1)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.base import ErrorV1, Message
from erpilot_contracts.json_input import CanonicalArguments


class ExecuteToolV1(Message):
    """Run a read or draft tool. Draft tools are idempotent by ``operation_id``."""

    session_id: str
    call_id: str
    operation_id: str
    tool: str
    arguments: CanonicalArguments = Field(description="Normalised arguments (already validated by the agent).")
    requested_by: str
    assertion: str | None = Field(None, description="The gateway's requester assertion for `requested_by` in "
                                                    "`session_id`, forwarded unchanged by the agent.")


class ToolResultV1(Message):
    """The outcome of a read or draft tool."""

    outcome: Literal["succeeded", "business_rejected"]
    result: dict[str, Any] | None = None
    error: ErrorV1 | None = None


class PreviewEffectV1(Message):
    label: str
    before: Any = None
    after: Any = None
    unit: str | None = Field(
        None, description="`pcs` for quantities; an ISO-4217 code when before/after are minor units of money; "
                          "None for a state (e.g. an order status).")


class PreviewV1(Message):
    """What a person sees before approving: operation, object, amount, target, effects before -> after."""

    operation: str = Field(description="Human title of the operation, e.g. 'Submit order'.")
    object: str = Field(description="What is acted on, e.g. 'Draft D-1002 revision 3'.")
    target: str = Field(description="Who or what is affected, e.g. the customer's full name.")
    amount_minor: int | None = None
    currency: str | None = None
    effects: list[PreviewEffectV1] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict, description="Tool-specific data, e.g. draft lines.")


class PrepareOperationV1(Message):
    operation_id: str
    session_id: str
    call_id: str
    tool: str
    tool_schema_version: int = 1
    arguments: CanonicalArguments
    fingerprint: str
    requested_by: str
    stock_check: Literal["exact", "sufficient"] | None = Field(
        None, description="submit_order only: the policy's `stock_check`; None: the ERP's default (exact).")
    assertion: str | None = Field(None, description="The gateway's requester assertion for `requested_by` in "
                                                    "`session_id`, forwarded unchanged by the agent. Required for a "
                                                    "new operation; an edit (`supersedes`) inherits its version's.")
    supersedes: str | None = Field(
        None, description="Edits only (sent by the approval service): the operation this one replaces. The ledger "
                          "takes the requester and the assertion from its own record of that operation.")
    edited_by: str | None = Field(None, description="Edits only: the person who edited the arguments.")


class PreparedOperationV1(Message):
    operation_id: str
    tool: str
    fingerprint: str
    preview: PreviewV1


class GetPreparedOperationV1(Message):
    """Ask the ledger for its own record of a prepared operation (asked by the approval service)."""

    operation_id: str


class PreparedRecordV1(Message):
    """The ledger's record of a prepared operation, as the ERP stored it at prepare.

    The approval service shows this preview and applies its amount rules to it; a request whose
    preview, fingerprint or arguments differ is refused, so the agent cannot decide what a person sees.
    """

    operation_id: str
    tool: str
    session_id: str
    call_id: str
    requested_by: str
    arguments: dict[str, Any]
    fingerprint: str
    preview: dict[str, Any] = Field(description="The preview exactly as `cmd.erp.prepare` answered it.")
    status: Literal["prepared", "committed", "rejected"]


class CommitOperationV1(Message):
    operation_id: str
    grant: GrantV1


class GetOperationV1(Message):
    operation_id: str


class OperationStatusV1(Message):
    operation_id: str
    tool: str
    status: Literal["prepared", "committed", "rejected"]
    session_id: str | None = None
    call_id: str | None = Field(None, description="The tool call the operation belongs to (unique per session).")
    requested_by: str | None = None
    pending_id: str | None = Field(None, description="The approval whose grant the commit consumed.")
    decided_by: str | None = Field(None, description="Who granted it (the grant's `decided_by`).")
    result: dict[str, Any] | None = None
    error: ErrorV1 | None = None
    committed_at: datetime | None = None


class ErpViewV1(Message):
    """Back-office read views behind ``/v1/erp/...``."""

    view: Literal["products", "product", "customers", "order", "draft"]
    id: str | None = None
    revision: int | None = None
    query: str = ""


class UpdateProductV1(Message):
    sku: str
    price_minor: int | None = None
    status: Literal["active", "discontinued"] | None = None
    updated_by: str
    request_id: str = Field(
        min_length=1, max_length=200,
        description="Idempotency key fixed before the first publish: a redelivered update with the same id "
                    "is answered, not re-applied.")
