"""The tool catalog, schema_version 1 (SPEC §2): argument models, kinds and descriptions.

Arguments are validated strictly: money is an integer of minor units, a float or a numeric string is
refused, unknown fields are refused. The normalised arguments (``normalise``) are what gets
fingerprinted, shown to the approver and executed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator

from erpilot_contracts import json_input
from erpilot_contracts.base import StrictBody

SCHEMA_VERSION = 1

Id = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")]
Qty = Annotated[int, Field(ge=1, le=100_000)]
Revision = Annotated[int, Field(ge=1)]
Note = Annotated[str, Field(max_length=1000)]


class ToolKind(StrEnum):
    READ = "read"
    DRAFT = "draft"
    WRITE = "write"


class SearchArgs(StrictBody):
    query: Annotated[str, Field(max_length=200, description="Case-insensitive substring of id or name.")]


class GetProductArgs(StrictBody):
    sku: Id


class GetOrderArgs(StrictBody):
    order_id: Id


class NoArgs(StrictBody):
    pass


MAX_DRAFT_PAGE = 200


class GetDraftArgs(StrictBody):
    draft_id: Id
    revision: Revision | None = None
    offset: Annotated[int, Field(ge=0, le=100_000, description="Lines to skip: offset 0 starts at item_number 1.")] \
        | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_DRAFT_PAGE, description="At most this many lines from offset.")] \
        | None = None


class DraftLineArgs(StrictBody):
    sku: Id
    qty: Qty


class CreateOrderDraftArgs(StrictBody):
    customer_id: Id
    lines: Annotated[list[DraftLineArgs], Field(min_length=1, max_length=200)]
    note: Note | None = None


class UpdateDraftLineArgs(StrictBody):
    draft_id: Id
    base_revision: Revision
    item_number: Annotated[int, Field(ge=1, description="1-based line number in the base revision.")]
    expected_sku: Id
    qty: Qty


class AddDraftLineArgs(StrictBody):
    draft_id: Id
    base_revision: Revision
    sku: Id
    qty: Qty


class RemoveDraftLineArgs(StrictBody):
    draft_id: Id
    base_revision: Revision
    item_number: Annotated[int, Field(ge=1)]
    expected_sku: Id


class SetDraftNoteArgs(StrictBody):
    draft_id: Id
    base_revision: Revision
    note: Note


class SubmitOrderArgs(StrictBody):
    draft_id: Id
    revision: Revision


class CancelOrderArgs(StrictBody):
    order_id: Id
    reason: Annotated[str, Field(max_length=500)] | None = None


class AdjustStockArgs(StrictBody):
    sku: Id
    delta: Annotated[int, Field(ge=-1_000_000, le=1_000_000, description="Non-zero change of on-hand units.")]
    reason: Annotated[str, Field(min_length=1, max_length=500)]

    @field_validator("delta")
    @classmethod
    def _non_zero(cls, value: int) -> int:
        if value == 0:
            raise ValueError("delta must be a non-zero integer")
        return value


class RefundPaymentArgs(StrictBody):
    order_id: Id
    amount_minor: Annotated[int, Field(ge=1, description="Integer minor units, e.g. cents.")]
    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="ISO-4217 code.")]
    channel: Literal["original"]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    kind: ToolKind
    args: type[StrictBody]
    description: str
    schema_version: int = SCHEMA_VERSION

    def input_schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()


TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in [
        ToolSpec("search_customers", ToolKind.READ, SearchArgs, "Find customers by id or name."),
        ToolSpec("search_products", ToolKind.READ, SearchArgs, "Find products by SKU or name."),
        ToolSpec("get_product", ToolKind.READ, GetProductArgs, "Read one product with price and stock."),
        ToolSpec("get_order", ToolKind.READ, GetOrderArgs, "Read one order with lines and payments."),
        ToolSpec("get_order_task", ToolKind.READ, NoArgs, "The open order draft(s) of this session."),
        ToolSpec("get_draft", ToolKind.READ, GetDraftArgs,
                 "Read a draft, its latest or a given revision; offset/limit page a long draft's lines "
                 "(line_count and the totals always cover the whole revision)."),
        ToolSpec("create_order_draft", ToolKind.DRAFT, CreateOrderDraftArgs, "Create an order draft."),
        ToolSpec("update_draft_line", ToolKind.DRAFT, UpdateDraftLineArgs, "Change a draft line's quantity."),
        ToolSpec("add_draft_line", ToolKind.DRAFT, AddDraftLineArgs, "Append a line to a draft."),
        ToolSpec("remove_draft_line", ToolKind.DRAFT, RemoveDraftLineArgs, "Remove a line from a draft."),
        ToolSpec("set_draft_note", ToolKind.DRAFT, SetDraftNoteArgs, "Set the note of a draft."),
        ToolSpec("submit_order", ToolKind.WRITE, SubmitOrderArgs, "Turn a draft revision into an order."),
        ToolSpec("cancel_order", ToolKind.WRITE, CancelOrderArgs,
                 "Cancel an order and return its quantities to stock. Never refunds."),
        ToolSpec("adjust_stock", ToolKind.WRITE, AdjustStockArgs, "Change a product's on-hand stock."),
        ToolSpec("refund_payment", ToolKind.WRITE, RefundPaymentArgs, "Refund part or all of an order's payment."),
    ]
}


class UnknownTool(LookupError):
    """The tool name is not in the catalog."""


class InvalidArguments(ValueError):
    """The arguments do not satisfy the tool's schema; ``errors`` lists what is wrong."""

    def __init__(self, tool: str, errors: list[dict[str, Any]]):
        super().__init__(f"invalid arguments for {tool}")
        self.tool = tool
        self.errors = errors


def get_tool(name: str) -> ToolSpec:
    try:
        return TOOLS[name]
    except KeyError:
        raise UnknownTool(name) from None


def normalise(tool: str, arguments: Any) -> dict[str, Any]:
    """Validate raw arguments against the tool's schema and return them in canonical form."""
    spec = get_tool(tool)
    if not isinstance(arguments, dict):
        raise InvalidArguments(tool, [{"loc": [], "msg": "arguments must be a JSON object", "type": "type"}])
    try:
        model = spec.args.model_validate(arguments)
    except ValidationError as exc:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        raise InvalidArguments(tool, errors) from None
    normalised = model.model_dump(mode="json", exclude_none=True)
    try:  # what a schema allows may still not be storable (NUL) or fingerprintable (beyond 2^53)
        json_input.check(normalised)
    except json_input.BadInput as exc:
        raise InvalidArguments(tool, [{"loc": [], "msg": str(exc), "type": exc.code}]) from None
    path = json_input.unsafe_integer_path(normalised)
    if path is not None:
        msg = "integers beyond ±(2^53-1) cannot be fingerprinted"
        raise InvalidArguments(tool, [{"loc": path, "msg": msg, "type": "invalid_arguments"}])
    return normalised
