"""The tamper-evident audit log (hash chain, signed rows) and its signed checkpoints

Revision ID: 0007_audit_log
Revises: 0006_quorum_votes
Create Date: 2026-12-02 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0007_audit_log'
down_revision = '0006_quorum_votes'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'audit_log',
        sa.Column('seq', sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('kind', sa.String(20), nullable=False),
        sa.Column('pending_id', sa.String(100), nullable=True),
        sa.Column('operation_id', sa.String(100), nullable=True),
        sa.Column('actor', sa.String(200), nullable=True),
        sa.Column('data', sa.JSON(), nullable=False),
        sa.Column('prev_hash', sa.String(64), nullable=False),
        sa.Column('hash', sa.String(64), nullable=False),
        sa.Column('signature', sa.String(100), nullable=False),
        schema='approval',
    )
    op.create_index('audit_log_pending', 'audit_log', ['pending_id'], schema='approval')
    op.create_index('audit_log_operation', 'audit_log', ['operation_id'], schema='approval')
    op.create_table(
        'audit_checkpoints',
        sa.Column('seq', sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column('hash', sa.String(64), nullable=False),
        sa.Column('signed_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('signature', sa.String(100), nullable=False),
        schema='approval',
    )


def downgrade() -> None:
    op.drop_table('audit_checkpoints', schema='approval')
    op.drop_table('audit_log', schema='approval')
