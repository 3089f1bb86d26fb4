"""required_roles as varchar[] with one partial list index per role; stock_check column

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

ROLES = ("requester", "approver", "manager", "admin")  # frozen here: a migration never imports app code


def upgrade() -> None:
    op.add_column('approvals', sa.Column('stock_check', sa.String(length=20), nullable=True), schema='approval')
    # JSON -> varchar[] (ALTER ... USING cannot hold the subquery this conversion needs).
    op.execute("ALTER TABLE approval.approvals ADD COLUMN required_roles_array varchar(20)[]")
    op.execute("UPDATE approval.approvals SET required_roles_array = "
               "ARRAY(SELECT json_array_elements_text(required_roles))")
    op.execute("ALTER TABLE approval.approvals DROP COLUMN required_roles")
    op.execute("ALTER TABLE approval.approvals RENAME COLUMN required_roles_array TO required_roles")
    op.execute("ALTER TABLE approval.approvals ALTER COLUMN required_roles SET NOT NULL")
    for role in ROLES:
        op.execute(
            f"CREATE INDEX approvals_list_{role} ON approval.approvals (status, created_at DESC, pending_id DESC) "
            f"WHERE required_roles @> ARRAY['{role}']::varchar(20)[]"
        )


def downgrade() -> None:
    for role in ROLES:
        op.execute(f"DROP INDEX approval.approvals_list_{role}")
    op.execute("ALTER TABLE approval.approvals ADD COLUMN required_roles_json json")
    op.execute("UPDATE approval.approvals SET required_roles_json = array_to_json(required_roles)")
    op.execute("ALTER TABLE approval.approvals DROP COLUMN required_roles")
    op.execute("ALTER TABLE approval.approvals RENAME COLUMN required_roles_json TO required_roles")
    op.execute("ALTER TABLE approval.approvals ALTER COLUMN required_roles SET NOT NULL")
    op.drop_column('approvals', 'stock_check', schema='approval')
