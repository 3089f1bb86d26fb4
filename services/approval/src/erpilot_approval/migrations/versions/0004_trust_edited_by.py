"""approvals.edited_by and approvals.editors: who shaped each version (separation of duties across edits)

Revision ID: 0004_trust
Revises: 0003
Create Date: 2026-12-01 19:45:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0004_trust'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('approvals', sa.Column('edited_by', sa.String(length=200), nullable=True), schema='approval')
    op.add_column('approvals', sa.Column('editors', postgresql.ARRAY(sa.String(length=200)), nullable=False,
                                         server_default=sa.text("'{}'")), schema='approval')


def downgrade() -> None:
    op.drop_column('approvals', 'editors', schema='approval')
    op.drop_column('approvals', 'edited_by', schema='approval')
