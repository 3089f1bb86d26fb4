"""standing approvals: approval.standing_approvals (issue 34)

A giver approves in advance the writes of one tool in one session up to an amount until a time; a request it
covers is approved in the transaction that records it (``domain/standing.py``).

Revision ID: 0014_standing_approvals
Revises: 0013_delegation_escalation
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision = '0014_standing_approvals'
down_revision = '0013_delegation_escalation'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'standing_approvals',
        sa.Column('standing_id', sa.String(100), primary_key=True),
        sa.Column('giver', sa.String(200), nullable=False),
        sa.Column('roles', ARRAY(sa.String(20)), nullable=False),
        sa.Column('session_id', sa.String(100), nullable=False),
        sa.Column('tool', sa.String(64), nullable=False),
        sa.Column('max_amount_minor', sa.BigInteger, nullable=True),
        sa.Column('until', sa.DateTime(timezone=True), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        schema='approval',
    )
    op.create_index('ix_approval_standing_approvals_giver', 'standing_approvals', ['giver'], schema='approval')
    op.create_index('standing_approvals_session_tool', 'standing_approvals', ['session_id', 'tool'],
                    schema='approval')


def downgrade() -> None:
    op.drop_table('standing_approvals', schema='approval')
