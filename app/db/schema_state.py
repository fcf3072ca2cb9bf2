"""Is the database's schema at the head of this jobmatch's migrations, and what to say when
it is not: the words /readyz, the API's 503 (app/api/schema_gate.py) and ``serve``'s
start-up warning share."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from app.db.migrate import current_revisions, migrations_dir


@dataclass(frozen=True)
class Revisions:
    """The revisions of this jobmatch's migration tree: its heads, and every one it knows."""

    heads: frozenset[str]
    known: frozenset[str]


@cache
def tree_revisions() -> Revisions:
    """Read once per process: the tree is part of the installation and does not change
    under a running server."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    script = ScriptDirectory.from_config(config)
    known = frozenset(revision.revision for revision in script.walk_revisions())
    return Revisions(heads=frozenset(script.get_heads()), known=known)


@dataclass(frozen=True)
class SchemaState:
    """The revisions the database is at (empty: never migrated) and the tree's heads."""

    current: frozenset[str]
    heads: frozenset[str]
    known: frozenset[str]

    @property
    def at_head(self) -> bool:
        return self.current == self.heads

    @property
    def ahead(self) -> bool:
        """The database is at a revision this jobmatch does not know: a newer version
        migrated it."""
        return bool(self.current - self.known)

    def describe(self) -> str:
        """One sentence for a person: where the schema is, where it should be, what to run."""
        current = ", ".join(sorted(self.current)) or "no revision (never migrated)"
        head = ", ".join(sorted(self.heads))
        if self.ahead:
            return (
                f"the database schema is at revision {current}, which this version of "
                f"jobmatch (head {head}) does not know: a newer jobmatch migrated it; serve "
                f"that version, or with it run `jobmatch db downgrade {head}` (`jobmatch db "
                f"upgrade` upgrades to this version's head only)"
            )
        return (
            f"the database schema is at {current}, the head of this jobmatch's migrations "
            f"is {head}: run `jobmatch db upgrade`"
        )


def read_schema_state(engine: Engine) -> SchemaState:
    """One query: the database's revisions, against the tree's (read once per process)."""
    tree = tree_revisions()
    return SchemaState(frozenset(current_revisions(engine)), tree.heads, tree.known)
