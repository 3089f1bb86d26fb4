"""One answer, in every service, to tool arguments that cannot be used (issue 12).

SPEC §2: an unknown tool name is 422 ``unknown_tool``; arguments that do not satisfy the tool's schema
are 422 ``invalid_arguments`` (with the schema's ``errors``). The agent, the approval service and the
ERP each check what they are sent, and a caller must get the same code whichever of them refuses it
(a tool the *policy* denies is another fault: 403 ``policy_denied``, decided by the policy, not here).
"""

from __future__ import annotations

from typing import Any

from erpilot_contracts.tools.v1 import InvalidArguments, UnknownTool, normalise
from erpilot_platform.refusals import Refused


def refusal(tool: str, exc: UnknownTool | InvalidArguments) -> Refused:
    """The refusal of an unknown tool or of arguments its schema refuses."""
    if isinstance(exc, UnknownTool):
        return Refused("unknown_tool", f"unknown tool {tool!r}", 422)
    return Refused("invalid_arguments", f"arguments do not match the schema of {tool}", 422, errors=exc.errors)


def normalised_arguments(tool: str, arguments: Any) -> dict[str, Any]:
    """The tool's normalised arguments; raises ``Refused`` ``unknown_tool`` / ``invalid_arguments`` (422)."""
    try:
        return normalise(tool, arguments)
    except (UnknownTool, InvalidArguments) as exc:
        raise refusal(tool, exc) from None
