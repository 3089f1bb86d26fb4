"""Typed tool arguments from the raw JSON object a message carried."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from erpilot_contracts.base import StrictBody
from erpilot_contracts.tools.v1 import get_tool, normalise


def parse_args(tool: str, arguments: Mapping[str, Any]) -> StrictBody:
    """The tool's argument model; raises the contracts' ``UnknownTool`` / ``InvalidArguments``."""
    # normalise() gives the precise, JSON-friendly error list; validating its output cannot fail again.
    return get_tool(tool).args.model_validate(normalise(tool, dict(arguments)))
