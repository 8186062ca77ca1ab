"""matrix version: a counter instead of a clock reading

``meta.matrix_version`` was the time of the last write, so two writes within one
reading of the clock (a frozen or stepped clock, a coarse one) left it unchanged
and readers that cache per version kept the first. It becomes a counter that
every write moves by one (``survey.ingest.bump_matrix_version``). A store that
had a version starts the counter at 1; one that had none gets 0 (nothing written
yet), so the row always exists: moving it is also every write's lock.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

meta = sa.table("meta", sa.column("id", sa.Integer), sa.column("key", sa.String), sa.column("value", sa.Text))


def upgrade():
    conn = op.get_bind()
    had = conn.execute(sa.select(meta.c.value).where(meta.c.key == "matrix_version")).first()
    if had is None:
        conn.execute(meta.insert().values(key="matrix_version", value="0"))
    else:
        conn.execute(meta.update().where(meta.c.key == "matrix_version").values(value="1"))


def downgrade():
    pass  # a counter is a valid version for the revision before: any text that changes
