"""The evidence store: SQLAlchemy 2 models, Alembic migrations, sessions.

SQLite by default (WAL mode), any SQLAlchemy URL works.
"""
