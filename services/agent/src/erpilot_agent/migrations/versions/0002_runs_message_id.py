"""runs: message_id (idempotent post_message), indexes for resuming runs

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('runs', sa.Column('message_id', sa.String(length=100), nullable=True), schema='agent')
    op.create_unique_constraint('runs_session_message', 'runs', ['session_id', 'message_id'], schema='agent')
    op.create_index('runs_unfinished', 'runs', ['status'], unique=False, schema='agent',
                    postgresql_where=sa.text("status IN ('running', 'waiting')"))
    op.create_index(op.f('ix_agent_tool_calls_run_id'), 'tool_calls', ['run_id'], unique=False, schema='agent')


def downgrade() -> None:
    op.drop_index(op.f('ix_agent_tool_calls_run_id'), table_name='tool_calls', schema='agent')
    op.drop_index('runs_unfinished', table_name='runs', schema='agent')
    op.drop_constraint('runs_session_message', 'runs', schema='agent', type_='unique')
    op.drop_column('runs', 'message_id', schema='agent')
