"""Alembic environment of the ERP schema (shared logic in erpilot_platform.migrations)."""

from erpilot_erp.adapters.tables import metadata
from erpilot_platform.migrations import run_env

run_env(metadata)
