"""Quorum approvals: approvals.approvals_required and one votes row per person and version

Revision ID: 0006_quorum_votes
Revises: 0005_mcp_webhooks
Create Date: 2026-12-02 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0006_quorum_votes'
down_revision = '0005_mcp_webhooks'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('approvals', sa.Column('approvals_required', sa.Integer(), nullable=False, server_default='1'),
                  schema='approval')
    op.create_table(
        'votes',
        sa.Column('vote_id', sa.BigInteger(), autoincrement=True, primary_key=True),
        sa.Column('pending_id', sa.String(100), nullable=False),
        sa.Column('voter', sa.String(200), nullable=False),
        sa.Column('role', sa.String(20), nullable=False),
        sa.Column('action', sa.String(20), nullable=False),
        sa.Column('fingerprint', sa.String(80), nullable=False),
        sa.Column('comment', sa.Text(), nullable=True),
        sa.Column('voted_at', sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint('pending_id', 'voter', name='votes_one_per_person'),
        schema='approval',
    )


def downgrade() -> None:
    op.drop_table('votes', schema='approval')
    op.drop_column('approvals', 'approvals_required', schema='approval')
