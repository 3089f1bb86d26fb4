"""notify the expiry sweepers of every replica when approvals are stored (LISTEN erpilot_approval_deadlines)

A statement-level trigger: one notification per inserting statement, delivered at its commit (none on a
rollback), so a sweeper can sleep until the next deadline it knows of instead of looking every second for
one a replica that then died stored (issue 13; service_layer/expiry.py).

Revision ID: 0010_deadline_notify
Revises: 0009_drop_inbox
"""

from alembic import op

revision = '0010_deadline_notify'
down_revision = '0009_drop_inbox'
branch_labels = None
depends_on = None

CHANNEL = 'erpilot_approval_deadlines'  # erpilot_approval.service_layer.sweeper.DEADLINES_CHANNEL


def upgrade() -> None:
    op.execute(f"""
        CREATE FUNCTION approval.notify_new_deadlines() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{CHANNEL}', '');
            RETURN NULL;
        END $$""")
    op.execute("""
        CREATE TRIGGER approvals_notify_new_deadlines AFTER INSERT ON approval.approvals
        FOR EACH STATEMENT EXECUTE FUNCTION approval.notify_new_deadlines()""")


def downgrade() -> None:
    op.execute("DROP TRIGGER approvals_notify_new_deadlines ON approval.approvals")
    op.execute("DROP FUNCTION approval.notify_new_deadlines()")
