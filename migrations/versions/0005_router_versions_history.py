"""router_versions: a history of published versions; the active one is the artifact folder's ACTIVE file

The `active` flag was written at every publish and never read (the gateway reads ACTIVE).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_router_versions_active", table_name="router_versions")
    with op.batch_alter_table("router_versions") as batch:
        batch.drop_column("active")


def downgrade() -> None:
    with op.batch_alter_table("router_versions") as batch:
        batch.add_column(sa.Column("active", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_index("ix_router_versions_active", "router_versions", ["active"])
