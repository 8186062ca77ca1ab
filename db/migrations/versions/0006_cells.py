"""cells: each slot's published checks, kept by the writer; a capture's artifact digest as text

``capture_results.artifact_sha256`` becomes text: the report schema allows any string
there, which a 64-character column refused on PostgreSQL.

One row per published check of a slot's latest complete run (``db.models.Cell``),
written by ``survey.verdicts.summary`` in the transaction that adds runs, so a
matrix page, its filters and the docs table read stored rows instead of working
every slot out again. Created empty here: the ``cells_stamp`` meta row is absent,
so readers work the rows out from the runs until the next write (or ``survey
serve``'s start) fills the table.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cells",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slot_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("ord", sa.Integer(), nullable=False),
        sa.Column("backend", sa.String(length=40), nullable=False),
        sa.Column("mode", sa.String(length=80), nullable=False),
        sa.Column("mode_arg", sa.String(length=80), nullable=True),
        sa.Column("outcome", sa.String(length=40), nullable=False),
        sa.Column("verdict", sa.String(length=20), nullable=False),
        sa.Column("verdict_source", sa.String(length=20), nullable=True),
        sa.Column("here", sa.String(length=40), nullable=False),
        sa.Column("cause", sa.String(length=40), nullable=True),
        sa.Column("stub_outcome", sa.String(length=40), nullable=True),
        sa.Column("library", sa.String(length=200), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("capture_outcome", sa.String(length=40), nullable=True),
        sa.Column("capture_kernel_count", sa.Integer(), nullable=True),
        sa.Column("capture_gpu_time_ns", sa.Float(), nullable=True),
        sa.Column("verdict_reason", sa.Text(), nullable=False),
        sa.Column("rule", sa.String(length=80), nullable=True),
        sa.Column("stub_rule", sa.String(length=80), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("live_id", sa.Integer(), nullable=True),
        sa.Column("stub_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["slot_id"], ["slots.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_cells_slot", "cells", ["slot_id", "ord"], unique=False)
    op.create_index("ix_cells_backend", "cells", ["backend", "mode", "slot_id"], unique=False)
    with op.batch_alter_table("capture_results") as batch_op:
        batch_op.alter_column("artifact_sha256", type_=sa.Text(), existing_type=sa.String(length=64),
                              existing_nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("capture_results") as batch_op:
        batch_op.alter_column("artifact_sha256", type_=sa.String(length=64), existing_type=sa.Text(),
                              existing_nullable=True)
    op.drop_index("ix_cells_backend", table_name="cells")
    op.drop_index("ix_cells_slot", table_name="cells")
    op.drop_table("cells")
    op.execute("DELETE FROM meta WHERE key = 'cells_stamp'")
