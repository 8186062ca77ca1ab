"""a run's checks, libraries and captures, and a slot's cells, keyed by their place

``mode_results``, ``library_results`` and ``capture_results`` lose their row id: a
row is keyed by its run and ``ord``, its place in the report's list (numbered here
in the order of the old ids, which is the report's). ``cells`` is keyed by its slot
and the ``ord`` it had. The key's index replaces the run's (the slot's) index, and
on SQLite each table is kept in the key's order (``WITHOUT ROWID``), so neither
store keeps a second index of these rows. A cell's ``live_id`` and ``stub_id`` now
name a check by its place; the cells are worked out again (the ``cells_stamp`` row
goes: readers work them out from the runs until ``survey serve``'s start or the next
``survey ingest`` stores them again).

Each table is copied once, on both stores; the downgrade copies them back with row
ids in the key's order.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# table -> its parent's column (the key is (parent, ord)), and the index of the parent it had
_TABLES = {"mode_results": ("run_id", "ix_mode_results_run"),
           "library_results": ("run_id", "ix_library_results_run"),
           "capture_results": ("run_id", "ix_capture_results_run"),
           "cells": ("slot_id", "ix_cells_slot")}
_KEPT_INDEXES = {"cells": [("ix_cells_backend", ["backend", "mode", "slot_id"])]}


def _copy(name: str, keyed: bool) -> None:
    """``name`` again, keyed by (parent, ord) when ``keyed``, else by a row id, its rows
    copied over in the key's order."""
    conn = op.get_bind()
    parent, parent_index = _TABLES[name]
    old = sa.Table(name, sa.MetaData(), autoload_with=conn)
    work = f"{name}_copy"
    md = old.metadata  # it holds the tables the foreign keys name, reflected with it
    columns = [sa.Column(c.name, c.type, nullable=c.nullable) for c in old.columns if c.name not in ("id", "ord")]
    fks = [sa.ForeignKeyConstraint([e.parent.name for e in fk.elements], [e.target_fullname for e in fk.elements],
                                   name=fk.name)  # later revisions' downgrades name them
           for fk in old.foreign_key_constraints]
    assert columns[0].name == parent, (name, columns[0].name)
    place = sa.Column("ord", sa.Integer(), nullable=False, autoincrement=False)
    if keyed:
        new = sa.Table(work, md, columns[0], place, *columns[1:], *fks, sa.PrimaryKeyConstraint(parent, "ord"),
                       sqlite_with_rowid=False)
        order = sa.func.row_number().over(partition_by=old.c[parent], order_by=old.c.id) - 1
        source = [old.c[parent], order if "ord" not in old.c else old.c.ord,
                  *(old.c[c.name] for c in columns[1:])]
    else:
        row_id = sa.Column("id", sa.Integer(), primary_key=True)
        extra = [place] if name == "cells" else []  # a cell kept its place; a check had none
        new = sa.Table(work, md, row_id, *columns[:1], *extra, *columns[1:], *fks)
        source = [sa.func.row_number().over(order_by=(old.c[parent], old.c.ord)), old.c[parent],
                  *([old.c.ord] if extra else []), *(old.c[c.name] for c in columns[1:])]
    new.create(conn)
    conn.execute(new.insert().from_select([c.name for c in new.columns], sa.select(*source)))
    op.drop_table(name)
    op.rename_table(work, name)
    if conn.dialect.name == "postgresql":  # the key's index is named after the table it was made for
        op.execute(f"ALTER INDEX {work}_pkey RENAME TO {name}_pkey")
        if not keyed:
            op.execute(f"ALTER SEQUENCE {work}_id_seq RENAME TO {name}_id_seq")
            op.execute(f"SELECT setval('{name}_id_seq', COALESCE((SELECT max(id) FROM {name}), 0) + 1, false)")
    for index, cols in _KEPT_INDEXES.get(name, []):
        op.create_index(index, name, cols)
    if not keyed:
        op.create_index(parent_index, name, [parent, "ord"] if name == "cells" else [parent])


def upgrade() -> None:
    op.execute("DELETE FROM cells")  # worked out again: live_id and stub_id name a check by its place
    op.execute("DELETE FROM meta WHERE key = 'cells_stamp'")
    for name in _TABLES:
        _copy(name, keyed=True)


def downgrade() -> None:
    op.execute("DELETE FROM cells")
    op.execute("DELETE FROM meta WHERE key = 'cells_stamp'")
    for name in _TABLES:
        _copy(name, keyed=False)
