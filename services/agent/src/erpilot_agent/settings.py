"""Agent settings (``ERPILOT_*``)."""

from __future__ import annotations

from erpilot_platform.settings import PlatformSettings


class AgentSettings(PlatformSettings):
    model: str = "rules"
    context_budget_tokens: int = 32000
    context_tool_bytes: int = 4096
    model_timeout_seconds: float = 60.0
    reconcile_after_seconds: float = 5.0
