"""drop agent.inbox: created by 0001 but never read or written (the agent is idempotent by call_key and message_id)

Revision ID: 0007_drop_inbox
Revises: 0006_daily
"""

import sqlalchemy as sa
from alembic import op

revision = '0007_drop_inbox'
down_revision = '0006_daily'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table('inbox', schema='agent')


def downgrade() -> None:
    op.create_table('inbox',
    sa.Column('message_key', sa.String(length=300), nullable=False),
    sa.Column('response', sa.JSON(), nullable=True),
    sa.Column('handled_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('message_key'),
    schema='agent'
    )
