"""tool_calls: call_id unique per session; call_key (derived from session_id and call_id) is the key

Revision ID: 0003_idem
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = '0003_idem'
down_revision = '0002'
branch_labels = None
depends_on = None

# The same derivation as erpilot_agent.domain.call_identity.call_key (length-prefixed session id).
_CALL_KEY = ("'tc_' || left(encode(sha256(convert_to("
             "length(session_id)::text || ':' || session_id || ':' || call_id, 'UTF8')), 'hex'), 40)")


def upgrade() -> None:
    op.add_column('tool_calls', sa.Column('call_key', sa.String(length=80), nullable=True), schema='agent')
    op.execute(f"UPDATE agent.tool_calls SET call_key = {_CALL_KEY}")
    op.alter_column('tool_calls', 'call_key', nullable=False, schema='agent')
    op.drop_constraint('tool_calls_pkey', 'tool_calls', schema='agent', type_='primary')
    op.create_primary_key('tool_calls_pkey', 'tool_calls', ['call_key'], schema='agent')
    op.create_unique_constraint('tool_calls_session_call', 'tool_calls', ['session_id', 'call_id'], schema='agent')


def downgrade() -> None:
    # Fails if one call_id is used in two sessions (which the old schema could not represent).
    op.drop_constraint('tool_calls_session_call', 'tool_calls', schema='agent', type_='unique')
    op.drop_constraint('tool_calls_pkey', 'tool_calls', schema='agent', type_='primary')
    op.create_primary_key('tool_calls_pkey', 'tool_calls', ['call_id'], schema='agent')
    op.drop_column('tool_calls', 'call_key', schema='agent')
