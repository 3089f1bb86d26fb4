"""credit_notes: the issue_credit_note write tool's table and its id sequence (CN-9101, ...)

Revision ID: 0005_credit_notes
Revises: 0004_one_op_per_call
Create Date: 2027-02-01 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0005_credit_notes'
down_revision = '0004_one_op_per_call'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(sa.schema.CreateSequence(sa.Sequence('credit_note_numbers', start=9101, schema='erp')))
    op.create_table(
        'credit_notes',
        sa.Column('credit_note_id', sa.String(64), primary_key=True),
        sa.Column('order_id', sa.String(64), sa.ForeignKey('erp.orders.order_id'), nullable=False),
        sa.Column('amount_minor', sa.BigInteger, nullable=False),
        sa.Column('currency', sa.String(3), nullable=False),
        sa.Column('reason', sa.Text, nullable=False),
        sa.Column('remaining_minor', sa.BigInteger, nullable=False),
        sa.Column('operation_id', sa.String(100), nullable=False, unique=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint('amount_minor > 0 AND remaining_minor >= 0', name='credit_within_order'),
        schema='erp',
    )
    op.create_index(op.f('ix_erp_credit_notes_order_id'), 'credit_notes', ['order_id'], unique=False, schema='erp')


def downgrade() -> None:
    op.drop_table('credit_notes', schema='erp')
    op.execute(sa.schema.DropSequence(sa.Sequence('credit_note_numbers', schema='erp')))
