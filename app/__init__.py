"""jobmatch: a SQL-backed matchmaking engine for job systems (docs/architecture.md draws
the house): notations (pure parsers), db (models, engine, the dialect seam), matching (the
rules engine's services), api (the HTTP service), and beside them the client, the command
line and the worker agent, which reach the service over HTTP only."""

__version__ = "0.1.0"
