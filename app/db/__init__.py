"""The database: the ORM models, the engine and its transactions, migrations, prebuilt
statements, announcements, and the one seam where SQLite and PostgreSQL differ
(dialect.py)."""
