"""Configurable rejection quorum: approvals.rejections_to_reject (1: the first reject ends it)

Revision ID: 0008_rejections_to_reject
Revises: 0007_audit_log
Create Date: 2026-12-02 12:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0008_rejections_to_reject'
down_revision = '0007_audit_log'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('approvals', sa.Column('rejections_to_reject', sa.Integer(), nullable=False, server_default='1'),
                  schema='approval')


def downgrade() -> None:
    op.drop_column('approvals', 'rejections_to_reject', schema='approval')
