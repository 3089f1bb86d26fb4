"""argument references: an index on the draft and the order an approval's arguments name

The gateway asks the approval service whether a person may read a draft or an order because an approval they may
decide names it (SPEC §10, ``query.approval.referring``); these expression indexes answer that without a scan
(``tables.named_in_arguments``).

Revision ID: 0012_argument_references
Revises: 0011_edit_intents
"""

import sqlalchemy as sa
from alembic import op

revision = '0012_argument_references'
down_revision = '0011_edit_intents'
branch_labels = None
depends_on = None

KEYS = ('draft_id', 'order_id')


def upgrade() -> None:
    for key in KEYS:
        expression = f"(arguments ->> '{key}')"
        op.create_index(f'approvals_naming_{key}', 'approvals', [sa.text(expression)], schema='approval',
                        postgresql_where=sa.text(f'{expression} IS NOT NULL'))


def downgrade() -> None:
    for key in KEYS:
        op.drop_index(f'approvals_naming_{key}', table_name='approvals', schema='approval')
