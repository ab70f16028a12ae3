"""session turns: which turn of a conversation a decision was (its first, a later one kept on the first's
model, or one routed afresh)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("decisions", sa.Column("session_turn", sa.String(8), nullable=True))


def downgrade() -> None:
    op.drop_column("decisions", "session_turn")  # in place (SQLite >= 3.35): a copy of decisions would cascade to its children
