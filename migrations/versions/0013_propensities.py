"""propensities: every model's probability under the distribution a decision was drawn from (its non-zero
entries), so that retrain weighs each logger's rows by what it really explored (causal/ope.py) instead of its
worst case where another model was drawn

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-08
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("decisions", sa.Column("propensities", sa.JSON(), nullable=True))  # on every partition of PostgreSQL's


def downgrade() -> None:
    op.drop_column("decisions", "propensities")
