"""Contract -> domain: a tool's arguments (the contracts' ``*Args`` models) as the domain's plain request.

The domain never sees a wire model: here the arguments are validated against the tool's schema (raising
the contracts' ``UnknownTool`` / ``InvalidArguments``) and copied into the domain's frozen dataclass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from erpilot_contracts.base import StrictBody
from erpilot_contracts.tools.v1 import (
    AddDraftLineArgs,
    CreateOrderDraftArgs,
    RemoveDraftLineArgs,
    SetDraftNoteArgs,
    UpdateDraftLineArgs,
    get_tool,
    normalise,
)
from erpilot_erp.domain.drafts import (
    DRAFT_EDIT_TOOLS,
    AddDraftLine,
    CreateDraft,
    DraftEdit,
    RemoveDraftLine,
    SetDraftNote,
    UpdateDraftLine,
)
from erpilot_erp.domain.operations import write_tool


def parse_args(tool: str, arguments: Mapping[str, Any]) -> StrictBody:
    """The tool's argument model; raises the contracts' ``UnknownTool`` / ``InvalidArguments``."""
    # normalise() gives the precise, JSON-friendly error list; validating its output cannot fail again.
    return get_tool(tool).args.model_validate(normalise(tool, dict(arguments)))


def write(tool: str, arguments: Mapping[str, Any]) -> Any:
    """A write tool's arguments as the domain's write (its ``WriteTool.args``; ValueError for any other tool)."""
    spec = write_tool(tool)
    return spec.parse(parse_args(tool, arguments).model_dump())


def draft_creation(arguments: Mapping[str, Any]) -> CreateDraft:
    args = parse_args("create_order_draft", arguments)
    assert isinstance(args, CreateOrderDraftArgs)
    return CreateDraft(customer_id=args.customer_id, lines=tuple((line.sku, line.qty) for line in args.lines),
                       note=args.note)


def draft_edit(tool: str, arguments: Mapping[str, Any]) -> DraftEdit:
    """One of the draft edit tools' arguments as the domain's edit (ValueError for any other tool)."""
    if tool not in DRAFT_EDIT_TOOLS:
        raise ValueError(f"{tool} is not a draft edit tool")
    args = parse_args(tool, arguments)
    if isinstance(args, UpdateDraftLineArgs):
        return UpdateDraftLine(draft_id=args.draft_id, base_revision=args.base_revision,
                               item_number=args.item_number, expected_sku=args.expected_sku, qty=args.qty)
    if isinstance(args, AddDraftLineArgs):
        return AddDraftLine(draft_id=args.draft_id, base_revision=args.base_revision, sku=args.sku, qty=args.qty)
    if isinstance(args, RemoveDraftLineArgs):
        return RemoveDraftLine(draft_id=args.draft_id, base_revision=args.base_revision,
                               item_number=args.item_number, expected_sku=args.expected_sku)
    assert isinstance(args, SetDraftNoteArgs)
    return SetDraftNote(draft_id=args.draft_id, base_revision=args.base_revision, note=args.note)
