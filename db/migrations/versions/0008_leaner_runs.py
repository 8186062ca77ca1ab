"""leaner runs: repeated texts kept once, no copies in the rows, reports with a preset dictionary

- ``texts`` (``db.models.StoredText``): a text that checks repeat from run to run, kept
  once under its sha256. ``mode_results.message`` and ``library_results.error`` and
  ``.fix`` become ``message_id``, ``error_id`` and ``fix_id``; the texts move there.
- ``library_results.candidates`` goes. No reader used it (the run page shows a
  library's candidates from the report, which keeps them). ``reports.sha256`` goes
  too: it is the run's ``report_hash``.
- A check's ``attempts`` and ``outcome_counts`` are SQL NULL when there are none
  (they were JSON ``null``; rows written before read the same).
- Reports written from now on are compressed with a preset dictionary
  (``db/compression.py``); the stream names its dictionary, so bodies written before
  stay as they are and read as before. This revision marks the format: an older
  proton-survey refuses the store rather than fail on a body it cannot read.

SQLite copies each changed table once (Alembic's batch mode): 1.7 s for a store of
5,000 runs (bench/bench_scale.py's), so about half a minute for 100,000; PostgreSQL
5.1 s for the same store (bench/measured/dev-2core-2026-12-05e-store/pg_upgrade.py).

Revision ID: 0008
Revises: 0007
"""

import hashlib
import zlib

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

BATCH = 5000
_FDICT = 0x20
# The dictionaries this revision's readers know, by their Adler-32 (db/dictionaries/).
_DICTIONARIES = ("10295c2b",)
_MOVED = {"mode_results": ("message",), "library_results": ("error", "fix")}


def _texts_table() -> sa.Table:
    return sa.table("texts", sa.column("id", sa.Integer), sa.column("sha256", sa.String),
                    sa.column("body", sa.Text))


def _intern(conn: sa.Connection, known: dict[str, int], values: set[str]) -> None:
    texts = _texts_table()
    new = {hashlib.sha256(v.encode("utf-8", "surrogatepass")).hexdigest(): v for v in values if v not in known}
    if new:
        conn.execute(texts.insert(), [{"sha256": h, "body": v} for h, v in new.items()])
        hashes = list(new)
        for first in range(0, len(hashes), 500):
            for h, i in conn.execute(sa.select(texts.c.sha256, texts.c.id)
                                     .where(texts.c.sha256.in_(hashes[first:first + 500]))):
                known[new[h]] = i


def upgrade() -> None:
    op.create_table(
        "texts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("sha256"),
    )
    conn = op.get_bind()
    known: dict[str, int] = {}
    for name, columns in _MOVED.items():
        with op.batch_alter_table(name) as batch_op:
            for c in columns:
                batch_op.add_column(sa.Column(f"{c}_id", sa.Integer(), nullable=True))
        table = sa.table(name, sa.column("id", sa.Integer), *(sa.column(c, sa.Text) for c in columns),
                         *(sa.column(f"{c}_id", sa.Integer) for c in columns))
        last = 0
        while True:
            chunk = conn.execute(sa.select(table.c.id, *(table.c[c] for c in columns)).where(table.c.id > last)
                                 .order_by(table.c.id).limit(BATCH)).all()
            if not chunk:
                break
            _intern(conn, known, {v for row in chunk for v in row[1:] if v is not None})
            updates = [{"rid": row[0], **{f"v_{c}": (known[v] if v is not None else None)
                                          for c, v in zip(columns, row[1:], strict=True)}}
                       for row in chunk if any(v is not None for v in row[1:])]
            if updates:
                conn.execute(table.update().where(table.c.id == sa.bindparam("rid"))
                             .values({f"{c}_id": sa.bindparam(f"v_{c}") for c in columns}), updates)
            last = chunk[-1][0]
        with op.batch_alter_table(name) as batch_op:
            for c in columns:
                batch_op.drop_column(c)
                batch_op.create_foreign_key(f"fk_{name}_{c}_id", "texts", [f"{c}_id"], ["id"])
            if name == "library_results":
                batch_op.drop_column("candidates")
    with op.batch_alter_table("reports") as batch_op:
        batch_op.drop_column("sha256")
    for name, column in (("mode_results", "attempts"), ("mode_results", "outcome_counts")):
        op.execute(f"UPDATE {name} SET {column} = NULL WHERE {column} IS NOT NULL AND "
                   f"CAST({column} AS TEXT) = 'null'")


def _plain(body: bytes) -> bytes:
    """``body`` again without its dictionary, as revision 0007 reads it."""
    if not (len(body) >= 6 and body[1] & _FDICT):
        return body
    from db.compression import dictionary

    name = body[2:6].hex()
    assert name in _DICTIONARIES, name
    d = zlib.decompressobj(zdict=dictionary(name))
    return zlib.compress(d.decompress(body) + d.flush(), 6)


def downgrade() -> None:
    with op.batch_alter_table("reports") as batch_op:
        batch_op.add_column(sa.Column("sha256", sa.String(64), nullable=False, server_default=""))
    conn = op.get_bind()
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("report_hash", sa.String))
    reports = sa.table("reports", sa.column("run_id", sa.Integer), sa.column("body", sa.LargeBinary),
                       sa.column("sha256", sa.String))
    conn.execute(reports.update().values(sha256=sa.select(runs.c.report_hash).where(runs.c.id == reports.c.run_id)
                                         .scalar_subquery()))
    last = 0
    while True:
        chunk = conn.execute(sa.select(reports.c.run_id, reports.c.body).where(reports.c.run_id > last)
                             .order_by(reports.c.run_id).limit(500)).all()
        if not chunk:
            break
        conn.execute(reports.update().where(reports.c.run_id == sa.bindparam("rid")).values(body=sa.bindparam("b")),
                     [{"rid": rid, "b": _plain(body)} for rid, body in chunk])
        last = chunk[-1][0]
    texts = _texts_table()
    for name, columns in _MOVED.items():
        with op.batch_alter_table(name) as batch_op:
            for c in columns:
                batch_op.add_column(sa.Column(c, sa.Text(), nullable=True))
            if name == "library_results":
                batch_op.add_column(sa.Column("candidates", sa.JSON(), nullable=False, server_default="[]"))
        table = sa.table(name, *(sa.column(c, sa.Text) for c in columns),
                         *(sa.column(f"{c}_id", sa.Integer) for c in columns))
        conn.execute(table.update().values({c: sa.select(texts.c.body).where(texts.c.id == table.c[f"{c}_id"])
                                            .scalar_subquery() for c in columns}))
        with op.batch_alter_table(name) as batch_op:
            for c in columns:
                batch_op.drop_constraint(f"fk_{name}_{c}_id", type_="foreignkey")
                batch_op.drop_column(f"{c}_id")
    op.drop_table("texts")
