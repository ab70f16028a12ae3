"""app and greedy model: the app a decision's request came from (a keyed hash of its system prompt: the
trust check compares teams' scores within an app) and the router's greedy choice before exploration

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("decisions", sa.Column("app", sa.String(16), nullable=True))
    op.add_column("decisions", sa.Column("greedy_model", sa.String(256), nullable=True))


def downgrade() -> None:
    op.drop_column("decisions", "greedy_model")  # in place (SQLite >= 3.35)
    op.drop_column("decisions", "app")
