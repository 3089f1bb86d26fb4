"""Alembic environment of the agent schema (shared logic in erpilot_platform.migrations)."""

from erpilot_agent.adapters.tables import metadata
from erpilot_platform.migrations import run_env

run_env(metadata)
