"""outcomes: how many failed upstream attempts came before the answer the client received

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("outcomes", sa.Column("retries", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outcomes") as batch:
        batch.drop_column("retries")
