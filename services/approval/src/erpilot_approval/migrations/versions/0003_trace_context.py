"""approvals.trace_context: the W3C trace context of the request, continued by decide and expiry

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-08 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('approvals', sa.Column('trace_context', sa.JSON(), nullable=True), schema='approval')


def downgrade() -> None:
    op.drop_column('approvals', 'trace_context', schema='approval')
