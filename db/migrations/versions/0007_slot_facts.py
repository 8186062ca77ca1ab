"""slot_facts: what the docs table reads of each slot, kept by the writer

One row per slot with a complete run (``db.models.SlotFacts``), written by
``survey.verdicts.summary`` beside the slot's cells, so the docs table and its Since
section read one small row per slot instead of its runs, checks and captures.
Created empty: the derivation's rules moved with it, so the stored cells' stamp is
stale, and readers work everything out from the runs until the next write (or
``survey serve``'s start) fills both tables.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slot_facts",
        sa.Column("slot_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("facts", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["slot_id"], ["slots.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        sa.PrimaryKeyConstraint("slot_id"),
    )


def downgrade() -> None:
    op.drop_table("slot_facts")
