"""Alembic environment of the approval schema (shared logic in erpilot_platform.migrations)."""

from erpilot_approval.adapters.tables import metadata
from erpilot_platform.migrations import run_env

run_env(metadata)
