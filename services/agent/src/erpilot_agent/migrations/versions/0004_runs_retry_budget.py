"""runs: failed attempts in a row and since when (a run gives up with retries_exhausted)

Revision ID: 0004_runs
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = '0004_runs'
down_revision = '0003_idem'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('runs', sa.Column('failed_attempts', sa.Integer(), server_default='0', nullable=False),
                  schema='agent')
    op.add_column('runs', sa.Column('failing_since', sa.DateTime(timezone=True), nullable=True), schema='agent')


def downgrade() -> None:
    op.drop_column('runs', 'failing_since', schema='agent')
    op.drop_column('runs', 'failed_attempts', schema='agent')
