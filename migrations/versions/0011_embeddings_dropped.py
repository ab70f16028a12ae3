"""embeddings dropped: `db prune` empties the embedding of a decision not scored within the score window
(store.score_window_days; it can no longer train), and this partial index holds the decisions whose embedding
is still there, the ones it walks; the scores by when they were written, as `db export` reads a day's

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    embedded = sa.text("length(embedding) > 0")
    op.create_index("ix_decisions_embedded", "decisions", ["created_at", "request_id"], sqlite_where=embedded,
                    postgresql_where=embedded)  # fmt: skip
    op.create_index("ix_feedback_updated", "feedback", ["updated_at"])


def downgrade() -> None:
    op.drop_index("ix_feedback_updated", table_name="feedback")
    op.drop_index("ix_decisions_embedded", table_name="decisions")
