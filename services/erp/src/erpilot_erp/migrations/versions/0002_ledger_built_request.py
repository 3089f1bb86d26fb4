"""operations: what the ledger needs to ask for approval itself (issue 25): the tool's schema version, the
requester assertion and when it was accepted, the operation an edit supersedes, when it was prepared, and who
decided its grant

Revision ID: 0002_ledger_request
Revises: 0001
Create Date: 2027-01-10 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0002_ledger_request'
down_revision = '0001'
branch_labels = None
depends_on = None

COLUMNS = (
    sa.Column('tool_schema_version', sa.Integer(), server_default='1', nullable=False),
    sa.Column('assertion', sa.Text(), nullable=True),
    sa.Column('asserted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('supersedes', sa.String(length=100), nullable=True),
    sa.Column('decided_by', sa.String(length=200), nullable=True),
    sa.Column('prepared_at', sa.DateTime(timezone=True), nullable=True),
)


def upgrade() -> None:
    for column in COLUMNS:
        op.add_column('operations', column, schema='erp')


def downgrade() -> None:
    for column in reversed(COLUMNS):
        op.drop_column('operations', column.name, schema='erp')
