"""sessions: index for the owner's list, newest first (GET /v1/sessions)

Revision ID: 0006_daily
Revises: 0003_idem
"""

from alembic import op

revision = '0006_daily'
down_revision = '0004_runs'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("sessions_owner_newest", "sessions",
                    ["owner", "created_at", "session_id"], schema="agent")


def downgrade() -> None:
    op.drop_index("sessions_owner_newest", table_name="sessions", schema="agent")
