"""standing runs: approval.standing_runs (security follow-up of #32/#34)

Per chat run, how many of its writes standing approvals approved and whether its owner ended it: a run's writes are
approved by standing approvals only until it ended and up to ``[standing] max_writes_per_run``
(``domain/standing_runs.py``).

Revision ID: 0017_standing_runs
Revises: 0016_one_approval_per_call
"""

import sqlalchemy as sa
from alembic import op

revision = '0017_standing_runs'
down_revision = '0016_one_approval_per_call'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'standing_runs',
        sa.Column('session_id', sa.String(100), primary_key=True),
        sa.Column('run_id', sa.String(100), primary_key=True),
        sa.Column('approved', sa.Integer, nullable=False, server_default='0'),
        sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('ended_by', sa.String(200), nullable=True),
        schema='approval',
    )


def downgrade() -> None:
    op.drop_table('standing_runs', schema='approval')
