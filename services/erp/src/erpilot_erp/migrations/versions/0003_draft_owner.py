"""drafts and orders: the owner, the person the gateway vouched for when the draft was created (orders inherit
their draft's)

Existing rows keep owner NULL. The ledger holds no record of who created a draft (a draft tool's operation stores
no requester, and an operation's requested_by in the same session is not proof of it), so no owner is guessed: a
draft or an order from a draft with owner NULL is nobody's. No one reads or writes it through the agent; the back
office (an admin, an approver of an approval naming it) still reads it over HTTP. An order no session made (the
back office's history, session_id NULL) keeps owner NULL and stays readable by every requester.

Revision ID: 0003_owner
Revises: 0002_ledger_request
Create Date: 2027-01-20 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0003_owner'
down_revision = '0002_ledger_request'
branch_labels = None
depends_on = None

TABLES = ('drafts', 'orders')


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column('owner', sa.String(length=200), nullable=True), schema='erp')


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_column(table, 'owner', schema='erp')
