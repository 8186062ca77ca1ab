"""identities: platforms, candidate scope, retries of failures, repeated attempts

- ``platforms``: the machine a run ran on; every run gets one. Runs stored by
  proton-survey 1.x are placed from their report (GPU vendor only: version-1
  reports record no model or architecture; no GPU -> ``none:<cpu arch>``); runs
  without a report (unobtainable, failed) on the platform ``unrecorded``.
- ``candidates.scope``: catalog (published) or adhoc (kept, not published).
  Interpreters checked by path (``python:...``), images by reference
  (``image:...``) and ingested reports become adhoc.
- 1.x filed every venv checked by path under its base interpreter
  (``python:/usr/bin/python3.11``). Each such run moves to a candidate named by
  the prefix its own report recorded (``python:/path/to/venv``); a candidate left
  without runs is removed. No run is lost.
- ``runs.tries``, ``runs.last_tried_at``, ``runs.error_key``: a failure that
  repeats is counted, not stored again.
- ``mode_results.attempts``, ``mode_results.outcome_counts``: repeated checks.

Revision ID: 0002
Revises: 0001
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

UNRECORDED = "unrecorded"


def _platform_of(raw):
    try:
        data = json.loads(raw)
        env = data.get("environment") or {}
        vendors = (env.get("gpu") or {}).get("vendors") or []
        machine = (env.get("platform") or {}).get("machine")
    except (ValueError, AttributeError, TypeError):
        return UNRECORDED, "unknown", None, None, None
    if not vendors:
        return f"none:{machine or 'unknown'}", "none", None, machine, data
    vendor = vendors[0] if vendors[0] in ("nvidia", "amd") else "unknown"
    return f"{vendor}:unknown-arch:unknown-model", vendor, None, None, data


def upgrade() -> None:
    op.create_table(
        "platforms",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("vendor", sa.String(length=20), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("arch", sa.String(length=60), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    with op.batch_alter_table("candidates") as b:
        b.add_column(sa.Column("scope", sa.String(length=20), nullable=False, server_default="catalog"))
    with op.batch_alter_table("environments") as b:
        b.add_column(sa.Column("label", sa.String(length=400), nullable=True))
    with op.batch_alter_table("runs") as b:
        b.add_column(sa.Column("platform_id", sa.Integer(), nullable=True))
        b.add_column(sa.Column("platform_detail", sa.JSON(), nullable=True))
        b.add_column(sa.Column("error_key", sa.Text(), nullable=True))
        b.add_column(sa.Column("tries", sa.Integer(), nullable=False, server_default="1"))
        b.add_column(sa.Column("last_tried_at", sa.DateTime(timezone=True), nullable=True))
        b.create_foreign_key("fk_runs_platform_id_platforms", "platforms", ["platform_id"], ["id"])
        b.create_index("ix_runs_candidate_platform", ["candidate_id", "platform_id", "id"], unique=False)
    with op.batch_alter_table("mode_results") as b:
        b.add_column(sa.Column("attempts", sa.JSON(), nullable=True))
        b.add_column(sa.Column("outcome_counts", sa.JSON(), nullable=True))

    conn = op.get_bind()
    meta = sa.MetaData()
    platforms = sa.Table("platforms", meta, autoload_with=conn)
    candidates = sa.Table("candidates", meta, autoload_with=conn)
    runs = sa.Table("runs", meta, autoload_with=conn)
    reports = sa.Table("reports", meta, autoload_with=conn)
    now = sa.func.now()

    keys = {}

    def platform_id(key, vendor, model, arch):
        if key not in keys:
            row = conn.execute(sa.select(platforms.c.id).where(platforms.c.key == key)).first()
            if row is None:
                conn.execute(platforms.insert().values(key=key, vendor=vendor, model=model, arch=arch,
                                                       created_at=now))
                row = conn.execute(sa.select(platforms.c.id).where(platforms.c.key == key)).first()
            keys[key] = row[0]
        return keys[key]

    cand_rows = {r.id: r for r in conn.execute(sa.select(candidates))}
    by_name = {r.name: r.id for r in cand_rows.values()}
    adhoc = [cid for cid, r in cand_rows.items()
             if r.kind in ("python", "ingested") or r.name.startswith(("python:", "image:"))]
    if adhoc:
        conn.execute(candidates.update().where(candidates.c.id.in_(adhoc)).values(scope="adhoc"))

    rows = conn.execute(sa.select(runs.c.id, runs.c.candidate_id, runs.c.finished_at, reports.c.raw)
                        .select_from(runs.outerjoin(reports, reports.c.run_id == runs.c.id))).all()
    for run_id, cand_id, finished_at, raw in rows:
        if raw is None:
            key, vendor, model, arch, data = UNRECORDED, "unknown", None, None, None
        else:
            key, vendor, model, arch, data = _platform_of(raw)
        values = {"platform_id": platform_id(key, vendor, model, arch), "last_tried_at": finished_at}
        cand = cand_rows[cand_id]
        if data is not None and cand.name.startswith("python:"):
            prefix = ((data.get("environment") or {}).get("python") or {}).get("prefix")
            new_name = f"python:{prefix}"[:200] if prefix else None
            if new_name and new_name != cand.name:
                if new_name not in by_name:
                    res = conn.execute(candidates.insert().values(
                        name=new_name, label=new_name, kind=cand.kind, spec=cand.spec, position=cand.position,
                        created_at=cand.created_at, updated_at=cand.updated_at, scope="adhoc"))
                    by_name[new_name] = res.inserted_primary_key[0]
                values["candidate_id"] = by_name[new_name]
        conn.execute(runs.update().where(runs.c.id == run_id).values(**values))
    for cid, cand in cand_rows.items():
        if cand.name.startswith("python:"):
            left = conn.execute(sa.select(sa.func.count()).select_from(runs).where(runs.c.candidate_id == cid))
            if left.scalar() == 0:
                conn.execute(candidates.delete().where(candidates.c.id == cid))


def downgrade() -> None:
    raise NotImplementedError("proton-survey stores are not downgraded; keep a copy of the database instead")
