"""Agent settings (``ERPILOT_*``)."""

from __future__ import annotations

from pydantic import Field

from erpilot_platform.settings import PlatformSettings


class AgentSettings(PlatformSettings):
    model: str = Field("rules", description="`rules` (offline planner) or `openai:<model>`.")
    context_budget_tokens: int = Field(32000, ge=1)
    context_tool_bytes: int = Field(4096, ge=1)
    model_timeout_seconds: float = Field(60.0, gt=0, description="One model request, retries included.")
    model_max_retries: int = Field(1, ge=0, description="Retries of a failed model request inside the timeout.")
    max_steps: int = Field(12, ge=1, description="Model requests per run before it fails with max_steps.")
    max_concurrent_runs: int = Field(8, ge=1, description="Runs one process drives at once (each holds a "
                                     "database connection); keep it well below the pool size of 20.")
    resume_runs_after_seconds: float = Field(
        5.0, description="A run left `running` this long without progress is re-driven (after a crash).")
    run_max_attempts: int = Field(10, ge=1, description="Failed attempts in a row (downstream away, ...) "
                                  "before a run fails with `retries_exhausted`.")
    run_give_up_seconds: float = Field(600.0, gt=0, description="A run failing this long without progress "
                                       "fails with `retries_exhausted`.")
