"""initial schema: decisions, outcomes, feedback, router_versions

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "router_versions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("artifact_path", sa.Text(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_router_versions_active", "router_versions", ["active"])
    op.create_table(
        "decisions",
        sa.Column("request_id", sa.String(128), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("team", sa.String(128), nullable=True),
        sa.Column("tier", sa.String(64), nullable=False),
        sa.Column("lam", sa.Float(), nullable=False),
        sa.Column("router_version", sa.String(64), nullable=True),
        sa.Column("embedding_model", sa.String(256), nullable=False),
        sa.Column("embedding_dim", sa.Integer(), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=False),
        sa.Column("chosen_model", sa.String(256), nullable=False),
        sa.Column("propensity", sa.Float(), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("prompt_hash", sa.String(64), nullable=False),
        sa.Column("prompt_text", sa.Text(), nullable=True),
        sa.Column("scores", sa.JSON(), nullable=True),
        sa.CheckConstraint("propensity > 0 AND propensity <= 1", name="ck_decisions_propensity"),
        sa.CheckConstraint("lam >= 0", name="ck_decisions_lam"),
        sa.CheckConstraint("mode IN ('policy', 'exploration', 'fallback', 'cold_start')", name="ck_decisions_mode"),
    )
    op.create_index("ix_decisions_created_at", "decisions", ["created_at"])
    op.create_index("ix_decisions_team_created", "decisions", ["team", "created_at"])
    op.create_table(
        "outcomes",
        sa.Column("request_id", sa.String(128), sa.ForeignKey("decisions.request_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint("cost_usd >= 0", name="ck_outcomes_cost"),
        sa.CheckConstraint("status IN ('success', 'failure')", name="ck_outcomes_status"),
    )
    op.create_table(
        "feedback",
        sa.Column("request_id", sa.String(128), sa.ForeignKey("decisions.request_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.CheckConstraint("score >= 0 AND score <= 1", name="ck_feedback_score"),
    )


def downgrade() -> None:
    op.drop_table("feedback")
    op.drop_table("outcomes")
    op.drop_index("ix_decisions_team_created", table_name="decisions")
    op.drop_index("ix_decisions_created_at", table_name="decisions")
    op.drop_table("decisions")
    op.drop_index("ix_router_versions_active", table_name="router_versions")
    op.drop_table("router_versions")
