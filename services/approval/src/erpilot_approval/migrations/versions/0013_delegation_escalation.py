"""delegations and escalation: approval.delegations; who a vote or decision was for; escalate_to/at, escalated_at

Delegation (SPEC §10): a delegate decides with the delegator's roles, and every vote and decision records for whom
(``on_behalf_of``; one vote per authority: ``votes_one_per_principal``). Escalation: an approval stores its policy's
``escalate_to`` and ``escalate_at`` when it is stored, and ``escalated_at`` once it escalated (issue 28).

Revision ID: 0013_delegation_escalation
Revises: 0011_edit_intents
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision = '0013_delegation_escalation'
down_revision = '0012_argument_references'
branch_labels = None
depends_on = None

ESCALATION_DUE = "status = 'pending' AND escalated_at IS NULL AND escalate_at IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        'delegations',
        sa.Column('delegation_id', sa.String(100), primary_key=True),
        sa.Column('delegator', sa.String(200), nullable=False),
        sa.Column('delegate', sa.String(200), nullable=False),
        sa.Column('roles', ARRAY(sa.String(20)), nullable=False),
        sa.Column('tools', ARRAY(sa.String(64)), nullable=True),
        sa.Column('until', sa.DateTime(timezone=True), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        schema='approval',
    )
    op.create_index('ix_approval_delegations_delegator', 'delegations', ['delegator'], schema='approval')
    op.create_index('ix_approval_delegations_delegate', 'delegations', ['delegate'], schema='approval')
    op.add_column('votes', sa.Column('on_behalf_of', sa.String(200), nullable=True), schema='approval')
    op.execute("CREATE UNIQUE INDEX votes_one_per_principal ON approval.votes "
               "(pending_id, coalesce(on_behalf_of, voter))")
    op.add_column('decisions', sa.Column('on_behalf_of', sa.String(200), nullable=True), schema='approval')
    for name, column in (('decided_on_behalf_of', sa.String(200)), ('escalate_to', sa.String(20)),
                         ('escalate_at', sa.DateTime(timezone=True)), ('escalated_at', sa.DateTime(timezone=True))):
        op.add_column('approvals', sa.Column(name, column, nullable=True), schema='approval')
    op.create_index('approvals_escalation_due', 'approvals', ['escalate_at'], schema='approval',
                    postgresql_where=sa.text(ESCALATION_DUE))


def downgrade() -> None:
    op.drop_index('approvals_escalation_due', 'approvals', schema='approval')
    for name in ('escalated_at', 'escalate_at', 'escalate_to', 'decided_on_behalf_of'):
        op.drop_column('approvals', name, schema='approval')
    op.drop_column('decisions', 'on_behalf_of', schema='approval')
    op.execute("DROP INDEX approval.votes_one_per_principal")
    op.drop_column('votes', 'on_behalf_of', schema='approval')
    op.drop_table('delegations', schema='approval')
