"""evidence store: candidates, environments, runs, reports, results

Revision ID: 0001
Revises:
Create Date: 2026-12-02 18:13:28.072955
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "candidates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("label", sa.String(length=400), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("identity", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("resolved", sa.JSON(), nullable=False),
        sa.Column("image_digest", sa.String(length=200), nullable=True),
        sa.Column("triton_distribution", sa.String(length=100), nullable=True),
        sa.Column("triton_version", sa.String(length=100), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("identity"),
    )
    op.create_table(
        "meta",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=True),
        sa.Column("probe_version", sa.String(length=40), nullable=True),
        sa.Column("schema_version", sa.Integer(), nullable=True),
        sa.Column("report_hash", sa.String(length=64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("triton_version", sa.String(length=100), nullable=True),
        sa.Column("image_digest", sa.String(length=200), nullable=True),
        sa.Column("profilers", sa.JSON(), nullable=True),
        sa.Column("cli_backends", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["candidate_id"],
            ["candidates.id"],
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("report_hash"),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_candidate_finished", ["candidate_id", "finished_at"], unique=False)

    op.create_table(
        "capture_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("backend", sa.String(length=40), nullable=True),
        sa.Column("mode", sa.String(length=80), nullable=True),
        sa.Column("outcome", sa.String(length=40), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("max_abs_err", sa.Float(), nullable=True),
        sa.Column("loop_s", sa.Float(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("kernel_count", sa.Integer(), nullable=True),
        sa.Column("gpu_time_ns", sa.Float(), nullable=True),
        sa.Column("top_kernel", sa.Text(), nullable=True),
        sa.Column("top_kernel_time_ns", sa.Float(), nullable=True),
        sa.Column("artifact_sha256", sa.String(length=64), nullable=True),
        sa.Column("artifact_bytes", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("capture_results", schema=None) as batch_op:
        batch_op.create_index("ix_capture_results_run", ["run_id"], unique=False)

    op.create_table(
        "library_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("backends", sa.JSON(), nullable=False),
        sa.Column("loads", sa.Boolean(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("versioned_only", sa.Boolean(), nullable=False),
        sa.Column("fix", sa.Text(), nullable=True),
        sa.Column("candidates", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("library_results", schema=None) as batch_op:
        batch_op.create_index("ix_library_results_run", ["run_id"], unique=False)

    op.create_table(
        "mode_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("backend", sa.String(length=40), nullable=False),
        sa.Column("mode", sa.String(length=80), nullable=True),
        sa.Column("env", sa.String(length=20), nullable=False),
        sa.Column("stub", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.String(length=40), nullable=False),
        sa.Column("rule", sa.String(length=80), nullable=True),
        sa.Column("library", sa.String(length=200), nullable=True),
        sa.Column("signal", sa.String(length=20), nullable=True),
        sa.Column("exc_type", sa.String(length=200), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("hung_at_exit", sa.Boolean(), nullable=False),
        sa.Column("stderr_tail", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("mode_results", schema=None) as batch_op:
        batch_op.create_index("ix_mode_results_run", ["run_id"], unique=False)

    op.create_table(
        "reports",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
        ),
        sa.PrimaryKeyConstraint("run_id"),
    )


def downgrade() -> None:
    op.drop_table("reports")
    with op.batch_alter_table("mode_results", schema=None) as batch_op:
        batch_op.drop_index("ix_mode_results_run")

    op.drop_table("mode_results")
    with op.batch_alter_table("library_results", schema=None) as batch_op:
        batch_op.drop_index("ix_library_results_run")

    op.drop_table("library_results")
    with op.batch_alter_table("capture_results", schema=None) as batch_op:
        batch_op.drop_index("ix_capture_results_run")

    op.drop_table("capture_results")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_candidate_finished")

    op.drop_table("runs")
    op.drop_table("meta")
    op.drop_table("environments")
    op.drop_table("candidates")
