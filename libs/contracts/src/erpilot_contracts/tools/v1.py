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


class Risk(StrEnum):
    """How much a call can hurt if it goes wrong; the approval service shows it and may raise it by amount."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class ResultKind(StrEnum):
    """What a tool's result is, so summaries and projections pick their shape by kind, never by tool name.

    ``label`` is how people call one; ``id_key`` the result field that identifies it. A *document* (a refund, a
    credit note) is money booked against an order: ``{<id_key>, order_id, amount_minor, currency,
    remaining_minor}``, and ``remains`` says what its ``remaining_minor`` still is ("refundable", "creditable").
    """

    label: str
    id_key: str
    remains: str

    def __new__(cls, value: str, label: str, id_key: str, remains: str = "") -> ResultKind:
        member = str.__new__(cls, value)
        member._value_ = value
        member.label, member.id_key, member.remains = label, id_key, remains
        return member

    @property
    def document(self) -> bool:
        return bool(self.remains)

    PRODUCT = "product", "Product", "sku"
    ORDER = "order", "Order", "order_id"
    DRAFT = "draft", "Draft", "draft_id"
    TASK = "task", "Order task", "status"
    LISTING = "listing", "Listing", "items"
    REFUND = "refund", "Refund", "refund_id", "refundable"
    CREDIT_NOTE = "credit_note", "Credit note", "credit_note_id", "creditable"


APPROVER_ROLES = ("approver", "manager")
"""The roles that may approve a write (``default_roles`` names only these)."""


@dataclass(frozen=True)
class Traits:
    """What others need to know about a tool, so that none of them matches tool names.

    Every field is required: a tool without a trait does not build (``ToolSpec`` checks a write's traits),
    there is no silent default.

    - ``money_out``: money leaves the company (or is owed to the customer) when it commits; always high risk.
    - ``repeat_safe``: calling it again with the same arguments has no further effect (MCP ``idempotentHint``).
    - ``object_key``: the argument that names the object it acts on (``order_id``, ``sku``, ``draft_id``), if any.
    - ``result_kind``: what its result is (``ResultKind``).
    - ``default_risk``: its risk before the amount is looked at.
    - ``default_roles``: who approves it when the policy says nothing (empty: reads and drafts need nobody).
    - ``default_amount_rule``: ``(min_amount_minor, roles)``: from that preview amount the default roles narrow
      to ``roles``; None: no such rule.
    - ``takes_stock_check``: its prepare and commit honour the policy's ``stock_check``.
    - ``headline``: a write's one-line subject in notifications, a ``str.format`` template over its arguments,
      ``{amount}`` (the preview's amount with currency) and ``{target}`` (the preview's); "" for reads and drafts.
    """

    money_out: bool
    repeat_safe: bool
    object_key: str | None
    result_kind: ResultKind
    default_risk: Risk
    default_roles: tuple[str, ...]
    default_amount_rule: tuple[int, tuple[str, ...]] | None
    takes_stock_check: bool
    headline: str


def _read(result_kind: ResultKind, object_key: str | None = None) -> Traits:
    return Traits(money_out=False, repeat_safe=True, object_key=object_key, result_kind=result_kind,
                  default_risk=Risk.LOW, default_roles=(), default_amount_rule=None, takes_stock_check=False,
                  headline="")


def _draft(repeat_safe: bool) -> Traits:
    """A draft tool adds a revision; one bound to ``base_revision`` fails ``draft_changed`` when repeated."""
    return Traits(money_out=False, repeat_safe=repeat_safe, object_key="draft_id" if repeat_safe else None,
                  result_kind=ResultKind.DRAFT, default_risk=Risk.LOW, default_roles=(), default_amount_rule=None,
                  takes_stock_check=False, headline="")


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


class IssueCreditNoteArgs(StrictBody):
    order_id: Id
    amount_minor: Annotated[int, Field(ge=1, description="Integer minor units, e.g. cents.")]
    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="ISO-4217 code.")]
    reason: Annotated[str, Field(min_length=1, max_length=500)]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    kind: ToolKind
    args: type[StrictBody]
    description: str
    traits: Traits
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        problems = trait_problems(self)
        if problems:
            raise ValueError(f"tool {self.name}: " + "; ".join(problems))

    def input_schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()


def trait_problems(spec: ToolSpec) -> list[str]:
    """What is missing or inconsistent in a tool's traits (a write states every one of them)."""
    traits = spec.traits
    if not isinstance(traits, Traits):
        return [f"traits must be a Traits, not {traits!r}"]
    problems = [f"trait {name} is missing" for name, value in vars(traits).items()
                if value is None and name not in ("object_key", "default_amount_rule")]
    if spec.kind is ToolKind.WRITE:
        if traits.object_key is None:
            problems.append("a write names the argument of the object it acts on (object_key)")
        elif traits.object_key not in spec.args.model_fields:
            problems.append(f"object_key {traits.object_key} is not one of its arguments")
        if not traits.default_roles or not set(traits.default_roles) <= set(APPROVER_ROLES):
            problems.append(f"a write is approved by default by some of {APPROVER_ROLES}, not {traits.default_roles}")
        if traits.default_risk is Risk.LOW:
            problems.append("a write is never low risk")
        if not traits.headline:
            problems.append("a write has a headline for its notifications")
    elif (traits.default_roles or traits.money_out or traits.takes_stock_check or traits.default_amount_rule
          or traits.headline):
        problems.append("only a write has approvers, moves money, checks stock, has amount rules or a headline")
    if traits.money_out and traits.default_risk is not Risk.HIGH:
        problems.append("money out is high risk")
    return problems


def _write(*, money_out: bool, repeat_safe: bool, object_key: str, result_kind: ResultKind, default_risk: Risk,
           default_roles: tuple[str, ...], headline: str,
           default_amount_rule: tuple[int, tuple[str, ...]] | None = None, takes_stock_check: bool = False) -> Traits:
    """A write's traits: all but the last two are stated by every write (keyword-only, no defaults)."""
    return Traits(money_out=money_out, repeat_safe=repeat_safe, object_key=object_key, result_kind=result_kind,
                  default_risk=default_risk, default_roles=default_roles, default_amount_rule=default_amount_rule,
                  takes_stock_check=takes_stock_check, headline=headline)


TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in [
        ToolSpec("search_customers", ToolKind.READ, SearchArgs, "Find customers by id or name.",
                 _read(ResultKind.LISTING)),
        ToolSpec("search_products", ToolKind.READ, SearchArgs, "Find products by SKU or name.",
                 _read(ResultKind.LISTING)),
        ToolSpec("get_product", ToolKind.READ, GetProductArgs, "Read one product with price and stock.",
                 _read(ResultKind.PRODUCT, "sku")),
        ToolSpec("get_order", ToolKind.READ, GetOrderArgs, "Read one order with lines and payments.",
                 _read(ResultKind.ORDER, "order_id")),
        ToolSpec("get_order_task", ToolKind.READ, NoArgs, "The open order draft(s) of this session.",
                 _read(ResultKind.TASK)),
        ToolSpec("get_draft", ToolKind.READ, GetDraftArgs,
                 "Read a draft, its latest or a given revision; offset/limit page a long draft's lines "
                 "(line_count and the totals always cover the whole revision).", _read(ResultKind.DRAFT, "draft_id")),
        ToolSpec("create_order_draft", ToolKind.DRAFT, CreateOrderDraftArgs, "Create an order draft.",
                 _draft(repeat_safe=False)),
        ToolSpec("update_draft_line", ToolKind.DRAFT, UpdateDraftLineArgs, "Change a draft line's quantity.",
                 _draft(repeat_safe=True)),
        ToolSpec("add_draft_line", ToolKind.DRAFT, AddDraftLineArgs, "Append a line to a draft.",
                 _draft(repeat_safe=True)),
        ToolSpec("remove_draft_line", ToolKind.DRAFT, RemoveDraftLineArgs, "Remove a line from a draft.",
                 _draft(repeat_safe=True)),
        ToolSpec("set_draft_note", ToolKind.DRAFT, SetDraftNoteArgs, "Set the note of a draft.",
                 _draft(repeat_safe=True)),
        # A repeat of one revision fails draft_closed.
        ToolSpec("submit_order", ToolKind.WRITE, SubmitOrderArgs, "Turn a draft revision into an order.",
                 _write(money_out=False, repeat_safe=True, object_key="draft_id", result_kind=ResultKind.ORDER,
                        default_risk=Risk.MEDIUM, default_roles=("approver", "manager"),
                        default_amount_rule=(1_000_000, ("manager",)), takes_stock_check=True,
                        headline="Order {amount} for {target}")),
        # A cancelled order cannot be cancelled again.
        ToolSpec("cancel_order", ToolKind.WRITE, CancelOrderArgs,
                 "Cancel an order and return its quantities to stock. Never refunds.",
                 _write(money_out=False, repeat_safe=True, object_key="order_id", result_kind=ResultKind.ORDER,
                        default_risk=Risk.MEDIUM, default_roles=("approver",), headline="Cancellation of {order_id}")),
        ToolSpec("adjust_stock", ToolKind.WRITE, AdjustStockArgs, "Change a product's on-hand stock.",
                 _write(money_out=False, repeat_safe=False, object_key="sku", result_kind=ResultKind.PRODUCT,
                        default_risk=Risk.MEDIUM, default_roles=("manager",),
                        headline="Stock change {delta:+d} on {sku}")),
        ToolSpec("refund_payment", ToolKind.WRITE, RefundPaymentArgs, "Refund part or all of an order's payment.",
                 _write(money_out=True, repeat_safe=False, object_key="order_id", result_kind=ResultKind.REFUND,
                        default_risk=Risk.HIGH, default_roles=("manager",), headline="Refund {amount} on {order_id}")),
        ToolSpec("issue_credit_note", ToolKind.WRITE, IssueCreditNoteArgs,
                 "Issue a credit note against a placed order: at most its total less refunds and earlier credit "
                 "notes. Moves no stock and refunds nothing.",
                 _write(money_out=True, repeat_safe=False, object_key="order_id",
                        result_kind=ResultKind.CREDIT_NOTE, default_risk=Risk.HIGH, default_roles=("manager",),
                        headline="Credit note {amount} on {order_id}")),
    ]
}

WRITE_TOOLS = tuple(name for name, spec in TOOLS.items() if spec.kind is ToolKind.WRITE)


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
