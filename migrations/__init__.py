"""The Alembic tree. Installed as the package app.migrations (see pyproject.toml), so an
installed jobmatch finds it with importlib.resources; Alembic itself reads it by path."""
