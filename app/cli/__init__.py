"""The `jobmatch` command line: remote commands speak HTTP through app.client (workers,
jobs, tasks, attributes...), local ones run here (serve, db, demo, scenario, the agent).

See docs/cli.md.
"""

from app.cli.main import cli, main

__all__ = ["cli", "main"]
