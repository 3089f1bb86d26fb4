"""edit intents: approval.edits, one row per edit the service asked the ERP to prepare

An edit re-prepares through the ERP, which sends the new version back as ``cmd.approval.request`` with
``supersedes``; the approval service accepts such a request only against the intent it recorded here, in the
edit's own checking transaction (issue 25, WRITE_PATH "Edits").

Revision ID: 0011_edit_intents
Revises: 0010_deadline_notify
"""

import sqlalchemy as sa
from alembic import op

revision = '0011_edit_intents'
down_revision = '0010_deadline_notify'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'edits',
        sa.Column('operation_id', sa.String(100), primary_key=True),
        sa.Column('pending_id', sa.String(100), nullable=False),
        sa.Column('editor', sa.String(200), nullable=False),
        sa.Column('fingerprint', sa.String(80), nullable=False),
        sa.Column('arguments', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('refusal', sa.JSON(), nullable=True),
        schema='approval',
    )


def downgrade() -> None:
    op.drop_table('edits', schema='approval')
