"""what really happened: the model group that answered (a LiteLLM fallback), a client that left mid-stream,
decisions answered by `serve --mock-upstream`

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

OLD_STATUSES = "status IN ('success', 'failure')"
NEW_STATUSES = "status IN ('success', 'failure', 'client_left')"


def upgrade() -> None:
    with op.batch_alter_table("outcomes", recreate="auto") as batch:
        batch.add_column(sa.Column("answered_model", sa.String(256), nullable=True))
        batch.drop_constraint("ck_outcomes_status", type_="check")
        batch.create_check_constraint("ck_outcomes_status", NEW_STATUSES)
    op.add_column("decisions", sa.Column("mock", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    op.execute("DELETE FROM outcomes WHERE status = 'client_left'")
    op.drop_column("decisions", "mock")  # in place (SQLite >= 3.35): a copy of decisions would cascade to its children
    with op.batch_alter_table("outcomes", recreate="auto") as batch:
        batch.drop_constraint("ck_outcomes_status", type_="check")
        batch.create_check_constraint("ck_outcomes_status", OLD_STATUSES)
        batch.drop_column("answered_model")
