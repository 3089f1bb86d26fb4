"""drop approval.inbox: created by 0001 but never read or written (requests are idempotent by operation_id,
decisions by the row lock and the recorded votes)

Revision ID: 0009_drop_inbox
Revises: 0008_rejections_to_reject
"""

import sqlalchemy as sa
from alembic import op

revision = '0009_drop_inbox'
down_revision = '0008_rejections_to_reject'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table('inbox', schema='approval')


def downgrade() -> None:
    op.create_table('inbox',
    sa.Column('message_key', sa.String(length=300), nullable=False),
    sa.Column('response', sa.JSON(), nullable=True),
    sa.Column('handled_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('message_key'),
    schema='approval'
    )
