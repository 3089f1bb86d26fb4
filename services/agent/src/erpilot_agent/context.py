"""The agent's context view as a public entry point, for who measures it offline (`erpilot context-eval`): the
very functions a run of the model builds its context with (``domain/``), so what is measured is what runs, and
nothing outside the agent reaches into its domain."""

from __future__ import annotations

from erpilot_agent.domain.context_view import DEFAULT_TOOL_BYTES, ContextOverflow, build_context
from erpilot_agent.domain.history import Exchange, entry_bytes, estimate_tokens, system_message
from erpilot_agent.domain.model_ids import for_model
from erpilot_agent.domain.prompt import SYSTEM_PROMPT
from erpilot_agent.domain.rules_summary import summarise

__all__ = ["DEFAULT_TOOL_BYTES", "SYSTEM_PROMPT", "ContextOverflow", "Exchange", "build_context", "entry_bytes",
           "estimate_tokens", "for_model", "summarise", "system_message"]
