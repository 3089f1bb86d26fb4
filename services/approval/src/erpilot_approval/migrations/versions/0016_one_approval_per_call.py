"""approvals: at most one first version per call (a unique index on session_id, call_id where supersedes is null)

The ledger prepares one operation per call (its migration 0004); this holds the same rule here, so an approval
request of a second operation for one call is never stored, even if a ledger let one through (security review of
issue #32: one direct call's assertion, several writes, each approved by a standing approval). Edits (supersedes
set) are new versions of the same call and stay outside. Creating the index fails if two first versions of one
call are stored already: look at them, nothing is deleted here.

Revision ID: 0016_one_approval_per_call
Revises: 0015_agent_reason
"""

import sqlalchemy as sa
from alembic import op

revision = '0016_one_approval_per_call'
down_revision = '0015_agent_reason'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('uq_approvals_call', 'approvals', ['session_id', 'call_id'], unique=True, schema='approval',
                    postgresql_where=sa.text('supersedes IS NULL'))


def downgrade() -> None:
    op.drop_index('uq_approvals_call', table_name='approvals', schema='approval')
