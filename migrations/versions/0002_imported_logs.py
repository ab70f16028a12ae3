"""imported historical logs: decisions without a logged propensity (mode 'imported')

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

OLD_MODES = "mode IN ('policy', 'exploration', 'fallback', 'cold_start')"
NEW_MODES = "mode IN ('policy', 'exploration', 'fallback', 'cold_start', 'imported')"


def upgrade() -> None:
    with op.batch_alter_table("decisions") as batch:
        batch.alter_column("propensity", existing_type=sa.Float(), nullable=True)
        batch.drop_constraint("ck_decisions_mode", type_="check")
        batch.create_check_constraint("ck_decisions_mode", NEW_MODES)


def downgrade() -> None:
    op.execute("DELETE FROM decisions WHERE propensity IS NULL")
    with op.batch_alter_table("decisions") as batch:
        batch.drop_constraint("ck_decisions_mode", type_="check")
        batch.create_check_constraint("ck_decisions_mode", OLD_MODES)
        batch.alter_column("propensity", existing_type=sa.Float(), nullable=False)
