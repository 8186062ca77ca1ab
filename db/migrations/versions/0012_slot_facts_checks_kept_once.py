"""slot_facts: a slot's checks kept once, in texts

A ``slot_facts`` row held its checks and the rest as two lines of one text. The
checks repeat from slot to slot (27,144 slots of 100,000 runs hold 7 distinct
texts of about 1.8 KB), so the row now names its checks by their id in ``texts``
(``checks_id``) and keeps only the rest in ``facts`` (about 160 bytes): the docs
table read 52 MB to build a table of 10,000 rows.

The table holds only what the writer derives (``survey.verdicts.summary``), so it is
made again empty and the stored cells' stamp goes: readers work everything out
from the runs until ``survey serve``'s start or the next ``survey ingest`` fills it
(as after revision 0010). The downgrade does the same the other way.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def _make(checks: bool) -> None:
    op.drop_table("slot_facts")
    op.create_table(
        "slot_facts",
        sa.Column("slot_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        *([sa.Column("checks_id", sa.Integer(), nullable=False)] if checks else []),
        sa.Column("facts", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["slot_id"], ["slots.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        *([sa.ForeignKeyConstraint(["checks_id"], ["texts.id"])] if checks else []),
        sa.PrimaryKeyConstraint("slot_id"),
    )
    op.execute(sa.text("DELETE FROM meta WHERE key = 'cells_stamp'"))


def upgrade() -> None:
    _make(checks=True)


def downgrade() -> None:
    _make(checks=False)
