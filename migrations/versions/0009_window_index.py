"""window index: the decisions of a time window read from one narrow index (created_at, then the columns
the savings report and retrain's window count by), not from the table's rows and their embeddings; it
replaces the index on created_at alone

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

COLUMNS = ["created_at", "team", "tier", "chosen_model", "mock", "request_id"]


def upgrade() -> None:
    op.create_index("ix_decisions_window", "decisions", COLUMNS)
    op.drop_index("ix_decisions_created_at", table_name="decisions")


def downgrade() -> None:
    op.create_index("ix_decisions_created_at", "decisions", ["created_at"])
    op.drop_index("ix_decisions_window", table_name="decisions")
