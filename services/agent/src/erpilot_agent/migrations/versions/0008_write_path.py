"""the write path of issue 25: requester assertions with calls and runs; no grant, no commit intent, no `approved`

The agent no longer commits (the approval service sends the commit with the decision, the ERP's
operation_finished event tells the outcome), so a call keeps neither the grant nor when its commit was sent,
and an approved call is `executing` at once. A call still `approved` when this runs was waiting for the old
agent to send its commit: it becomes `executing` (its outcome arrives as an event if the commit is made).

Revision ID: 0008_write_path
Revises: 0007_drop_inbox
"""

import sqlalchemy as sa
from alembic import op

revision = '0008_write_path'
down_revision = '0007_drop_inbox'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('tool_calls', sa.Column('assertion', sa.Text(), nullable=True), schema='agent')
    op.add_column('runs', sa.Column('assertion', sa.Text(), nullable=True), schema='agent')
    op.execute("UPDATE agent.tool_calls SET status = 'executing' WHERE status = 'approved'")
    op.drop_column('tool_calls', 'grant', schema='agent')
    op.drop_column('tool_calls', 'commit_sent_at', schema='agent')


def downgrade() -> None:
    op.add_column('tool_calls', sa.Column('commit_sent_at', sa.DateTime(timezone=True), nullable=True),
                  schema='agent')
    op.add_column('tool_calls', sa.Column('grant', sa.JSON(), nullable=True), schema='agent')
    op.drop_column('runs', 'assertion', schema='agent')
    op.drop_column('tool_calls', 'assertion', schema='agent')
