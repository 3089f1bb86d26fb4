"""The operation fingerprint of SPEC §3: the one value that binds an approval to exact arguments."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785


def fingerprint(tool: str, schema_version: int, arguments: dict[str, Any]) -> str:
    """Return ``sha256:<hex>`` of the RFC 8785 canonical JSON of tool, version and normalised arguments."""
    canonical = rfc8785.dumps({"tool": tool, "schema_version": schema_version, "arguments": arguments})
    return "sha256:" + hashlib.sha256(canonical).hexdigest()
