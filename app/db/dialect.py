"""Everything that differs between SQLite and PostgreSQL, in one place.

The rest of the code asks this module instead of testing ``dialect.name`` itself, so that
adding a behaviour for one database means reading one file (Prefect's seam, made small).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import (
    ARRAY,
    Boolean,
    ColumnElement,
    ColumnExpressionArgument,
    Index,
    Integer,
    any_,
    bindparam,
    event,
    func,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from app.db.connections import ConnectionOptions
from app.notations.gridengine.wildcard_nfa import sql_request_match

#: Execution option carrying whether a transaction will write. On SQLite a writing
#: transaction starts with BEGIN IMMEDIATE so that it takes the write lock up front:
#: upgrading a read lock later can fail at once with SQLITE_BUSY, whatever busy_timeout says.
WRITE_OPTION = "jobmatch_write"


def partial_index(name: str, *columns: Any, where: str, unique: bool = False) -> Index:
    """An index over the rows where ``where`` holds, on SQLite and PostgreSQL alike (each
    dialect takes the predicate under its own keyword)."""
    return Index(
        name,
        *columns,
        unique=unique,
        sqlite_where=text(where),
        postgresql_where=text(where),
    )


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def engine_arguments(
    url: str, *, busy_timeout: float, options: ConnectionOptions | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``create_engine`` suited to the URL's database."""
    if is_sqlite(url):
        return {"connect_args": {"timeout": busy_timeout, "check_same_thread": False}}
    options = options or ConnectionOptions()
    connect_args: dict[str, Any] = {}
    if not options.prepares_statements:
        # Behind a transaction pooler the next transaction may run on a server connection
        # that never saw the statement (app/db/connections.py).
        connect_args["prepare_threshold"] = None
    if not options.behind_pooler:
        # JIT compilation pays off for long analytic queries; ours are short statements
        # with large expressions (a compiled constraint tree is hundreds of subplans), where
        # PostgreSQL's JIT spent 3 s compiling what runs in 0.2 s without it. A pooler
        # refuses this startup option: install_hooks turns JIT off per transaction then.
        connect_args["options"] = "-c jit=off"
    return {
        # No pre-ping: it cost a round trip on every checkout, a third of a pull's. A
        # pooled connection that died since its last use fails its first statement
        # instead; the pool then drops it (and every connection older than the failure),
        # and the request runs its transaction again (is_retryable_error).
        "pool_size": options.pool_size,
        "max_overflow": options.max_overflow,
        "connect_args": connect_args,
    }


#: Where a pooled connection remembers that its database has JIT on, so that each of its
#: transactions turns it off (behind a pooler only).
_JIT_ON_KEY = "jobmatch_jit_on"


def install_hooks(
    engine: Engine, *, busy_timeout: float, options: ConnectionOptions | None = None
) -> None:
    """Connection set-up that the driver does not do for us."""
    if engine.dialect.name == "postgresql" and options is not None and options.behind_pooler:
        _turn_jit_off_per_transaction(engine)
    if engine.dialect.name != "sqlite":
        return

    @event.listens_for(engine, "connect")
    def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
        # Stop pysqlite from issuing its own BEGIN (it does so late and never IMMEDIATE);
        # the "begin" hook below emits the right one. This is the recipe of SQLAlchemy's
        # "Serializable isolation / Savepoints / Transactional DDL" section for pysqlite.
        dbapi_connection.isolation_level = None
        dbapi_connection.create_function(
            STRING_MATCH_FUNCTION, 3, sql_request_match, deterministic=True
        )
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
            cursor.execute("PRAGMA synchronous=NORMAL")
            if not _is_memory_database(engine):
                cursor.execute("PRAGMA journal_mode=WAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _sqlite_begin(connection: Connection) -> None:
        writes = connection.get_execution_options().get(WRITE_OPTION, True)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")


def _turn_jit_off_per_transaction(engine: Engine) -> None:
    """Behind a pooler, where JIT cannot be turned off at connect: ``SET LOCAL jit = off``
    at the start of each transaction, unless the database (or role) has it off already
    (``ALTER DATABASE ... SET jit = off``, the cheaper way: no statement per transaction),
    which each new connection looks up once."""

    @event.listens_for(engine, "connect")
    def _look_up_jit(dbapi_connection: Any, record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("SHOW jit")
            record.info[_JIT_ON_KEY] = cursor.fetchone()[0] != "off"
        finally:
            cursor.close()
        dbapi_connection.rollback()

    @event.listens_for(engine, "begin")
    def _jit_off(connection: Connection) -> None:
        if connection.connection.info.get(_JIT_ON_KEY, True):
            connection.exec_driver_sql("SET LOCAL jit = off")


def _is_memory_database(engine: Engine) -> bool:
    database = engine.url.database
    return database in (None, "", ":memory:") or "mode=memory" in str(engine.url)


def is_busy_error(error: BaseException) -> bool:
    """True when the database refused for lack of a lock; the client may simply retry."""
    text = str(getattr(error, "orig", error)).lower()
    return "database is locked" in text or "database table is locked" in text


#: PostgreSQL SQLSTATEs after which re-running the whole transaction is the documented
#: remedy: serialization_failure and deadlock_detected (PostgreSQL manual, "Serialization
#: Failure Handling"). The server aborted the transaction; nothing of it was stored.
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})


#: Set on an error raised by COMMIT itself (app/db/engine.py): whether the transaction was
#: stored is then unknown, so it is never run again.
COMMIT_OUTCOME_UNKNOWN = "jobmatch_commit_outcome_unknown"


def is_lost_connection(error: BaseException) -> bool:
    """True when the connection died under a statement before COMMIT was sent (a pooled
    connection the server closed meanwhile, a restarted server): the server rolled the
    transaction back, and the pool has dropped the connection."""
    return bool(getattr(error, "connection_invalidated", False)) and not getattr(
        error, COMMIT_OUTCOME_UNKNOWN, False
    )


def is_retryable_error(error: BaseException) -> bool:
    """True when the transaction failed only because of concurrent transactions (a
    deadlock, a serialization failure, SQLite's lock wait running out) or a connection
    lost before its COMMIT, and running it again from the start is safe and likely to
    succeed."""
    if getattr(getattr(error, "orig", None), "sqlstate", None) in RETRYABLE_SQLSTATES:
        return True
    return is_busy_error(error) or is_lost_connection(error)


#: Key of the PostgreSQL advisory lock that serialises changes to the misfit cache.
MATCHING_CHANGES_LOCK = 0x6A6F626D  # "jobm"


def lock_matching_changes(connection: Connection) -> None:
    """Serialise writers of the misfit cache (new categories, changed workers).

    A new category computes its misfits against the workers it can see, and a changed
    worker against the categories it can see; under READ COMMITTED two such transactions
    could miss each other and leave a pair unevaluated. On PostgreSQL a transaction-level
    advisory lock orders them (each later statement sees the other's commit). SQLite
    writers are already serialised by BEGIN IMMEDIATE.
    """
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MATCHING_CHANGES_LOCK})")


def supports_skip_locked(connection: Connection) -> bool:
    """Whether SELECT ... FOR UPDATE SKIP LOCKED exists (PostgreSQL) or writers are simply
    serialised and row locks are moot (SQLite)."""
    return connection.dialect.name == "postgresql"


def notifies_across_processes(connection: Connection) -> bool:
    """Whether the database itself carries announcements to every listening connection
    when a transaction commits (PostgreSQL's NOTIFY); on SQLite they stay in the process
    (app/db/notify.py)."""
    return connection.dialect.name == "postgresql"


def supports_writing_ctes(connection: Connection) -> bool:
    """Whether a WITH clause may hold INSERT/UPDATE ... RETURNING whose rows the rest of
    the statement uses (PostgreSQL), so that several dependent writes take one round
    trip; SQLite runs them as separate statements (cheap there: no round trip)."""
    return connection.dialect.name == "postgresql"


def keeps_subquery_order(connection: Connection) -> bool:
    """Whether the planner carries the order of a subquery in FROM to the query around
    it, so that an ORDER BY ... LIMIT there meets the sorted rows one by one and stops
    early (PostgreSQL). SQLite 3.40 sorts them again, after evaluating the outer WHERE
    for every row; cheap round trips let the caller feed it batches instead."""
    return connection.dialect.name == "postgresql"


def binds_arrays(connection: Connection) -> bool:
    """Whether a list can be bound as one array parameter and unnested into rows
    (PostgreSQL), so that many rows' writes take one statement instead of an
    executemany of one statement per row; SQLite, in process, takes the executemany."""
    return connection.dialect.name == "postgresql"


def among_ids(
    connection: Connection, column: ColumnElement[int], ids: list[int]
) -> ColumnElement[bool]:
    """``column`` is one of ``ids``: on PostgreSQL ``= ANY(:ids)``, one array parameter,
    so that the statement's text is the same whatever the number of ids (psycopg and
    the server parse and plan it once; an IN list of 450 ids was 450 parameters to
    render and parse per call, some 10 ms of a demand report); elsewhere an IN list."""
    if connection.dialect.name == "postgresql":
        return column == any_(bindparam("among_ids", ids, type_=ARRAY(Integer)))
    return column.in_(ids)


def json_rows_function(connection: Connection) -> tuple[str, str]:
    """The aggregate that gathers rows into one JSON array and the function that makes
    one row a JSON array: json_agg and json_build_array on PostgreSQL, SQLite's JSON1
    json_group_array and json_array (so that one query can carry a few rows per result
    row without a round trip of their own)."""
    if connection.dialect.name == "postgresql":
        return "json_agg", "json_build_array"
    return "json_group_array", "json_array"


def generic_plans_from_here() -> ColumnElement[str]:
    """PostgreSQL: an expression that, evaluated in a statement, makes the rest of the
    transaction run prepared statements with generic plans (``SET LOCAL plan_cache_mode
    = force_generic_plan``, without a round trip of its own). For transactions whose
    later statements are large and planned alike whatever their parameters: PostgreSQL's
    default re-plans a statement whenever its generic plan looks dearer, which it does
    when it cannot see a LIMIT or the length of an array parameter."""
    return func.set_config("plan_cache_mode", "force_generic_plan", True)


#: The SQLite function testing a stored value against a Grid Engine string request.
STRING_MATCH_FUNCTION = "sge_match"


class StringRequestMatch(FunctionElement[bool]):
    """Whether an offered string matches a Grid Engine string request (6.1+ semantics).

    Arguments: the offered value (lower-cased for CSTRING/HOST), the request's text, a
    boolean "folds case" and the request compiled to a regex (app/notations/
    complex_regex.py). SQLite calls :data:`STRING_MATCH_FUNCTION`, a non-backtracking
    automaton over the request's text (app/notations/gridengine/wildcard_nfa.py): SQLAlchemy's own
    REGEXP there is Python's backtracking ``re``, which a ``*?*?*?...`` pattern freezes for
    minutes (issue 19). PostgreSQL tests ``value ~ regex``: its regex engine simulates
    automata rather than backtracking, and answered every pattern and value of issue 19's
    probe in milliseconds (tests/hostile/test_wildcard_redos.py measures it).
    """

    type = Boolean()
    inherit_cache = True
    name = "string_request_match"


@compiles(StringRequestMatch)
def _string_request_match_regex(
    element: StringRequestMatch, compiler: SQLCompiler, **kw: Any
) -> str:
    value, _text, _folds, regex = element.clauses
    return compiler.process(value.regexp_match(regex), **kw)


@compiles(StringRequestMatch, "sqlite")
def _string_request_match_sqlite(
    element: StringRequestMatch, compiler: SQLCompiler, **kw: Any
) -> str:
    value, text, folds, _regex = element.clauses
    call = getattr(func, STRING_MATCH_FUNCTION)(text, folds, value)
    return compiler.process(call == 1, **kw)


def string_request_match(
    value: ColumnExpressionArgument[str | None],
    text: ColumnExpressionArgument[str],
    folds: ColumnExpressionArgument[bool],
    regex: ColumnExpressionArgument[str | None],
) -> ColumnElement[bool]:
    """See :class:`StringRequestMatch`."""
    return StringRequestMatch(value, text, folds, regex)


@contextmanager
def grouping_by_index(connection: Connection) -> Iterator[None]:
    """PostgreSQL: within the block, GROUP BY reads an index in its order (a group
    aggregate over an index-only scan) instead of hashing a scan of the whole table.

    The planner costs both alike for a partial index over most of a table, but the scan
    that filters every row took 47 ms for 100,000 waiting jobs against 17 ms for the
    index (bench/demand.py). ``enable_hashagg`` is set for the transaction and put back
    after the block, as it was. Elsewhere nothing changes."""
    if connection.dialect.name != "postgresql":
        yield
        return
    before = connection.execute(
        select(
            func.current_setting("enable_hashagg"), func.set_config("enable_hashagg", "off", True)
        )
    ).scalar_one()
    try:
        yield
    finally:
        connection.execute(select(func.set_config("enable_hashagg", before, True)))
