"""agent_reason: the agent's words on why it asks, shown to the approver as "the agent says" (issue 34)

Revision ID: 0015_agent_reason
Revises: 0014_standing_approvals
"""

import sqlalchemy as sa
from alembic import op

revision = '0015_agent_reason'
down_revision = '0014_standing_approvals'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('approvals', sa.Column('agent_reason', sa.Text, nullable=True), schema='approval')


def downgrade() -> None:
    op.drop_column('approvals', 'agent_reason', schema='approval')
