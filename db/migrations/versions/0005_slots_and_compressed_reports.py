"""slots, indexes for the environment and platform of a run, compressed reports

- ``slots``: one row per (candidate, platform) with evidence, naming its latest run
  and its latest complete run; the writer keeps it in the transaction that adds a run
  (``survey.evidence.ingest``), so a page of the matrix reads its own slots instead of
  grouping every run. Filled here from the runs already stored.
- ``ix_candidates_position``: the catalog order a page walks.
- ``ix_runs_environment`` (environment, platform, probe version, status): the
  complete runs of one environment (``survey.verdicts.stability``) without a scan;
  ``ix_runs_platform``: the foreign key.
- ``reports.raw`` (text) becomes ``reports.body``: the same canonical JSON,
  zlib-compressed, converted here in batches.

Revision ID: 0005
Revises: 0004
"""

import zlib

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

BATCH = 500


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.create_index("ix_runs_environment", ["environment_id", "platform_id", "probe_version", "status"],
                              unique=False)
        batch_op.create_index("ix_runs_platform", ["platform_id"], unique=False)
    op.create_index("ix_candidates_position", "candidates", ["position", "id"], unique=False)
    op.create_table(
        "slots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=True),
        sa.Column("last_run_id", sa.Integer(), nullable=False),
        sa.Column("complete_run_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["candidate_id"], ["candidates.id"]),
        sa.ForeignKeyConstraint(["platform_id"], ["platforms.id"]),
        sa.ForeignKeyConstraint(["last_run_id"], ["runs.id"]),
        sa.ForeignKeyConstraint(["complete_run_id"], ["runs.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("candidate_id", "platform_id"),
    )
    op.create_index("ix_slots_platform", "slots", ["platform_id"], unique=False)
    op.create_index("ix_slots_last_run", "slots", ["last_run_id"], unique=False)
    op.create_index("ix_slots_complete_run", "slots", ["complete_run_id"], unique=False)
    conn = op.get_bind()
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("candidate_id", sa.Integer),
                    sa.column("platform_id", sa.Integer), sa.column("status", sa.String))
    slots = sa.table("slots", sa.column("candidate_id", sa.Integer), sa.column("platform_id", sa.Integer),
                     sa.column("last_run_id", sa.Integer), sa.column("complete_run_id", sa.Integer))
    group = (runs.c.candidate_id, runs.c.platform_id)
    complete = dict(((c, p), i) for c, p, i in conn.execute(
        sa.select(*group, sa.func.max(runs.c.id)).where(runs.c.status == "complete").group_by(*group)))
    rows = [{"candidate_id": c, "platform_id": p, "last_run_id": i, "complete_run_id": complete.get((c, p))}
            for c, p, i in conn.execute(sa.select(*group, sa.func.max(runs.c.id)).group_by(*group))]
    for first in range(0, len(rows), BATCH):
        conn.execute(slots.insert(), rows[first:first + BATCH])

    op.add_column("reports", sa.Column("body", sa.LargeBinary(), nullable=True))
    reports = sa.table("reports", sa.column("run_id", sa.Integer), sa.column("raw", sa.Text),
                       sa.column("body", sa.LargeBinary))
    last = 0
    while True:
        chunk = conn.execute(sa.select(reports.c.run_id, reports.c.raw).where(reports.c.run_id > last)
                             .order_by(reports.c.run_id).limit(BATCH)).all()
        if not chunk:
            break
        conn.execute(reports.update().where(reports.c.run_id == sa.bindparam("rid")).values(body=sa.bindparam("b")),
                     [{"rid": rid, "b": zlib.compress(raw.encode("utf-8"), 6)} for rid, raw in chunk])
        last = chunk[-1][0]
    with op.batch_alter_table("reports") as batch_op:
        batch_op.alter_column("body", existing_type=sa.LargeBinary(), nullable=False)
        batch_op.drop_column("raw")


def downgrade() -> None:
    op.add_column("reports", sa.Column("raw", sa.Text(), nullable=True))
    conn = op.get_bind()
    reports = sa.table("reports", sa.column("run_id", sa.Integer), sa.column("raw", sa.Text),
                       sa.column("body", sa.LargeBinary))
    for rid, body in conn.execute(sa.select(reports.c.run_id, reports.c.body)).all():
        conn.execute(reports.update().where(reports.c.run_id == rid)
                     .values(raw=zlib.decompress(body).decode("utf-8")))
    with op.batch_alter_table("reports") as batch_op:
        batch_op.alter_column("raw", existing_type=sa.Text(), nullable=False)
        batch_op.drop_column("body")
    op.drop_index("ix_slots_complete_run", table_name="slots")
    op.drop_index("ix_slots_last_run", table_name="slots")
    op.drop_index("ix_slots_platform", table_name="slots")
    op.drop_table("slots")
    op.drop_index("ix_candidates_position", table_name="candidates")
    with op.batch_alter_table("runs") as batch_op:
        batch_op.drop_index("ix_runs_platform")
        batch_op.drop_index("ix_runs_environment")
