"""feedback per source: a user's score and the LLM judge's kept apart; what a score cost

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""
import warnings

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _batch(table: str):
    """batch_alter_table that copies the table; SQLite's copy reports the changed key as a mismatch (expected)."""
    warnings.filterwarnings("ignore", message=".*_alembic_tmp_feedback.*primary_key.*", category=sa.exc.SAWarning)
    return op.batch_alter_table(table, recreate="always")


def upgrade() -> None:
    # SQLite cannot change a primary key in place: batch mode copies the table (existing rows keep their
    # source); there the old key has no name and the new one replaces it
    with _batch("feedback") as batch:
        if op.get_bind().dialect.name != "sqlite":
            batch.drop_constraint("feedback_pkey", type_="primary")
        batch.create_primary_key("feedback_pkey", ["request_id", "source"])
        batch.add_column(sa.Column("cost_usd", sa.Float(), nullable=True))
        batch.create_check_constraint("ck_feedback_cost", "cost_usd IS NULL OR cost_usd >= 0")


def downgrade() -> None:
    # one row per request again: keep each request's most recently updated score
    op.execute(
        "DELETE FROM feedback WHERE EXISTS (SELECT 1 FROM feedback AS f2 WHERE f2.request_id = feedback.request_id "
        "AND (f2.updated_at > feedback.updated_at OR (f2.updated_at = feedback.updated_at AND f2.source > feedback.source)))"
    )
    with _batch("feedback") as batch:
        batch.drop_constraint("ck_feedback_cost", type_="check")
        batch.drop_column("cost_usd")
        if op.get_bind().dialect.name != "sqlite":
            batch.drop_constraint("feedback_pkey", type_="primary")
        batch.create_primary_key("feedback_pkey", ["request_id"])
