"""One answer, in every service, to tool arguments that cannot be used (issue 12).

SPEC §2: an unknown tool name is 422 ``unknown_tool``; arguments that do not satisfy the tool's schema
are 422 ``invalid_arguments`` (with the schema's ``errors``). The agent, the approval service and the
ERP each check what they are sent, and a caller must get the same code whichever of them refuses it
(a tool the *policy* denies is another fault: 403 ``policy_denied``, decided by the policy, not here).
"""

from __future__ import annotations

from typing import Any

from erpilot_contracts.base import ReplyV1
from erpilot_contracts.tools.v1 import InvalidArguments, UnknownTool, normalise


def refusal(tool: str, exc: UnknownTool | InvalidArguments) -> ReplyV1:
    """The failure reply for an unknown tool or arguments its schema refuses."""
    if isinstance(exc, UnknownTool):
        return ReplyV1.failure("unknown_tool", f"unknown tool {tool!r}", 422)
    return ReplyV1.failure("invalid_arguments", f"arguments do not match the schema of {tool}", 422,
                           errors=exc.errors)


def normalised_or_refusal(tool: str, arguments: Any) -> dict[str, Any] | ReplyV1:
    """The tool's normalised arguments, or the ``unknown_tool`` / ``invalid_arguments`` failure (422)."""
    try:
        return normalise(tool, arguments)
    except (UnknownTool, InvalidArguments) as exc:
        return refusal(tool, exc)
