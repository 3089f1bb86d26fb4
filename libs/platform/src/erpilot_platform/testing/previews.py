"""A valid ledger preview for tests (``PreviewV1``): the fields a test cares about, the rest plain defaults.

Tests of the approval and agent services and of the gateway build approvals without a ledger; their previews
must still be what the ERP would send (operation, object, target required; effects, notes typed), so they build
them here rather than as partial dicts.
"""

from __future__ import annotations

from typing import Any

from erpilot_contracts.erp.preview import PreviewV1


def preview(operation: str = "Submit order", object: str = "Draft D-1 revision 1", target: str = "Nordwind GmbH",
            **fields: Any) -> PreviewV1:
    """A preview with these fields (``amount_minor``, ``currency``, ``effects``, ``notes``, ``details``, or a
    field a newer ledger might add)."""
    return PreviewV1.model_validate({"operation": operation, "object": object, "target": target, **fields})


def preview_json(operation: str = "Submit order", object: str = "Draft D-1 revision 1",
                 target: str = "Nordwind GmbH", **fields: Any) -> dict[str, Any]:
    """The same preview as the JSON it travels as (a stored row, a message body built by hand)."""
    return preview(operation, object, target, **fields).model_dump(mode="json")
