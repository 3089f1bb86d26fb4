"""operations: at most one operation per call (a unique index on session_id, call_id of first versions)

A direct call's requester assertion vouches for one call; without this index the agent could prepare any number
of writes under it, with new operation ids and other arguments (security review of issue #32). Edits (supersedes
set) are new versions of the same call and stay outside the index. Creating the index fails if a ledger already
holds two first versions of one call: those are the attack's traces, to be looked at, not deleted here.

Revision ID: 0004_one_op_per_call
Revises: 0003_owner
Create Date: 2027-01-24 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0004_one_op_per_call'
down_revision = '0003_owner'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('uq_operations_call', 'operations', ['session_id', 'call_id'], unique=True, schema='erp',
                    postgresql_where=sa.text('supersedes IS NULL'))


def downgrade() -> None:
    op.drop_index('uq_operations_call', table_name='operations', schema='erp')
