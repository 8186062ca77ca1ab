"""cells indexed by outcome and by verdict

Two narrow indexes of the ``cells`` table, ``(outcome, slot_id)`` and
``(verdict, slot_id)``: a filtered page's count of the slots with a cell of that
outcome (verdict) reads the index range of that value, not each slot's cells (on a
store of 100,000 runs a count asked every one of 27,000 slots: 70-100 ms; through
the index 9-27 ms). Filtering by backend had its index already (``ix_cells_backend``).
Nothing is rewritten.

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_cells_outcome", "cells", ["outcome", "slot_id"])
    op.create_index("ix_cells_verdict", "cells", ["verdict", "slot_id"])


def downgrade() -> None:
    op.drop_index("ix_cells_verdict", table_name="cells")
    op.drop_index("ix_cells_outcome", table_name="cells")
