"""an index for the pass over left tool calls: external calls not driven yet (running, preparing), by age

The agent's pass every 30 s (``drive_left_calls_forever``) reads the external calls their request's handler left;
without this it filtered every unfinished call (``tool_calls_unfinished``) by source and age, and sorted them.

Revision ID: 0009_left_calls
Revises: 0008_write_path
"""

import sqlalchemy as sa
from alembic import op

revision = '0009_left_calls'
down_revision = '0008_write_path'
branch_labels = None
depends_on = None

LEFT = "source = 'external' AND status IN ('running', 'preparing')"


def upgrade() -> None:
    op.create_index('tool_calls_left_by_request', 'tool_calls', ['created_at'], unique=False, schema='agent',
                    postgresql_where=sa.text(LEFT))


def downgrade() -> None:
    op.drop_index('tool_calls_left_by_request', table_name='tool_calls', schema='agent',
                  postgresql_where=sa.text(LEFT))
