"""webhook_deliveries (outgoing webhooks and their dead letters) and expiry_warnings (approval_expiring once)

Revision ID: 0005_mcp_webhooks
Revises: 0003
Create Date: 2026-12-01 20:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0005_mcp_webhooks'
down_revision = '0004_trust'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'webhook_deliveries',
        sa.Column('delivery_id', sa.BigInteger(), autoincrement=True, primary_key=True),
        sa.Column('event_id', sa.String(40), nullable=False),
        sa.Column('event_type', sa.String(40), nullable=False),
        sa.Column('url', sa.Text(), nullable=False),
        sa.Column('pending_id', sa.String(100), nullable=True),
        sa.Column('body', sa.Text(), nullable=False),
        sa.Column('status', sa.String(20), nullable=False, server_default='pending'),
        sa.Column('attempts', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('last_error', sa.Text(), nullable=True),
        sa.UniqueConstraint('event_id', 'url', name='webhook_deliveries_event_url'),
        schema='approval',
    )
    op.create_index('webhook_deliveries_due', 'webhook_deliveries', ['next_attempt_at'], schema='approval',
                    postgresql_where=sa.text("status = 'pending'"))
    op.create_table(
        'expiry_warnings',
        sa.Column('pending_id', sa.String(100), primary_key=True),
        sa.Column('warned_at', sa.DateTime(timezone=True), nullable=False),
        schema='approval',
    )


def downgrade() -> None:
    op.drop_table('expiry_warnings', schema='approval')
    op.drop_index('webhook_deliveries_due', table_name='webhook_deliveries', schema='approval')
    op.drop_table('webhook_deliveries', schema='approval')
