"""ERP commands, queries and events (schema_version 1)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, RootModel

from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.base import ErrorV1, Message

# The preview lives in erp.preview (the approval contracts carry it too); named here as before.
from erpilot_contracts.erp.preview import PreviewEffectV1 as PreviewEffectV1
from erpilot_contracts.erp.preview import PreviewV1 as PreviewV1
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
    edit_signature: str | None = Field(
        None, description="Edits only: the approval service's Ed25519 signature (its grant key) over every other "
                          "field; the ERP takes `supersedes` from nobody else (the agent may publish this subject).")
    agent_reason: str | None = Field(None, max_length=500, description=(
        "The agent's own words on why it asks (the tool call's `reason`): passed on in the approval request as the "
        "agent's claim, outside the fingerprint; the ledger keeps and checks nothing of it."))


class PreparedOperationV1(Message):
    """The ledger stored the operation and, in the same transaction, asked for its approval
    (``cmd.approval.request`` from its outbox): the caller has nothing more to send."""

    operation_id: str
    tool: str
    fingerprint: str
    preview: PreviewV1


class CommitOperationV1(Message):
    """Commit a prepared operation under its grant. Sent by the approval service only, from its outbox, in the
    transaction that recorded the approving decision; answered when it carries a reply inbox."""

    operation_id: str
    grant: GrantV1


class GetOperationV1(Message):
    operation_id: str


class OperationStatusV1(Message):
    """An operation's state; also ``evt.erp.operation_finished`` (status committed or rejected), which tells the
    agent the outcome of the call (``session_id``, ``call_id``) and the approval service whose grant it used."""

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


# --- results in SPEC §2 shapes (the ERP's views and the product change answer these; not versioned messages:
# they travel on to HTTP clients exactly as shown, without a schema_version) ---------------------------------
class ResultShape(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# Times as the tools' results write them (``datetime.isoformat()``), so a view of an object equals the result a
# tool gave for it.
IsoDateTime = Annotated[datetime, PlainSerializer(lambda value: value.isoformat(), return_type=str, when_used="json")]


class ProductV1(ResultShape):
    sku: str
    name: str
    status: Literal["active", "discontinued"]
    price_minor: int
    currency: str
    on_hand: int


class CustomerV1(ResultShape):
    customer_id: str
    name: str
    discount_pct: int


class ProductListV1(ResultShape):
    items: list[ProductV1]


class CustomerListV1(ResultShape):
    items: list[CustomerV1]


class OrderLineV1(ResultShape):
    sku: str
    name: str
    qty: int
    unit_price_minor: int
    line_total_minor: int


class CreditNoteV1(ResultShape):
    """A credit note issued against an order (``issue_credit_note``'s result)."""

    credit_note_id: str
    order_id: str
    amount_minor: int
    currency: str
    reason: str
    remaining_minor: int = Field(description="What of the order stayed creditable right after it.")


class OrderV1(ResultShape):
    order_id: str
    status: Literal["placed", "cancelled"]
    customer_id: str
    customer_name: str
    lines: list[OrderLineV1]
    total_amount_minor: int
    currency: str
    paid_minor: int
    refunded_minor: int
    draft_id: str | None
    revision: int | None
    created_at: IsoDateTime
    credit_notes: list[CreditNoteV1] = Field(
        default_factory=list, description="The credit notes issued against the order, oldest first (`get_order` and "
                                          "the order view; a write's result for the order leaves them out).")
    session_id: str | None = Field(
        None, description="The session whose draft made the order; null for an order no session made (the back "
                          "office's history). For the gateway, which decides who may see the order (SPEC §10); it "
                          "is not shown to HTTP clients.")
    owner: str | None = Field(
        None, description="The person whose draft made the order (the draft's owner); null for an order no session "
                          "made and for orders made before owners were recorded. For the gateway, which lets a "
                          "requester read the order only if it is theirs (SPEC §10); it is not shown to HTTP "
                          "clients.")


class DraftLineV1(ResultShape):
    item_number: int
    sku: str
    name: str
    qty: int
    unit_price_minor: int
    discount_pct: int
    line_total_minor: int
    stock_before: int


class DraftRevisionV1(ResultShape):
    """A draft revision as the back office sees it, with the draft's latest revision number."""

    draft_id: str
    revision: int
    status: Literal["open", "submitted"]
    customer_id: str
    customer_name: str
    lines: list[DraftLineV1]
    total_amount_minor: int
    currency: str
    note: str | None
    valid_until: IsoDateTime
    created_at: IsoDateTime
    latest_revision: int
    session_id: str | None = Field(
        None, description="The session the draft belongs to. For the gateway, which decides who may see the draft "
                          "(SPEC §10); it is not shown to HTTP clients.")
    owner: str | None = Field(
        None, description="The person who created the draft (the `sub` the gateway vouched for); null for drafts "
                          "made before owners were recorded, which are nobody's. For the gateway, which lets a "
                          "requester read the draft only if it is theirs (SPEC §10); it is not shown to HTTP "
                          "clients.")


class ErpViewResultV1(RootModel[ProductListV1 | CustomerListV1 | ProductV1 | OrderV1 | DraftRevisionV1]):
    """The answer of ``query.erp.view``: the model of the view asked for (``products``: ``ProductListV1``,
    ``customers``: ``CustomerListV1``, ``product``, ``order``, ``draft``: the one object)."""


class UpdateProductV1(Message):
    sku: str
    price_minor: int | None = None
    status: Literal["active", "discontinued"] | None = None
    updated_by: str
    request_id: str = Field(
        min_length=1, max_length=200,
        description="Idempotency key fixed before the first publish: a redelivered update with the same id "
                    "is answered, not re-applied.")
