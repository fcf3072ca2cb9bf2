"""The default complex attribute table of Grid Engine 6.2u5 (``qconf -sc`` after install).

Data copied from ``tests/vectors/sge/complex_defaults.jsonl`` (51 rows, derived from
``source/dist/util/resources/centry/*`` at ``V62u5_TAG``, see docs/notations/gridengine.md),
so that :mod:`app.notations.gridengine.attribute_table` is self-contained; the test suite
checks that the two stay equal. ``origin`` says where values come from (``host_load`` or
``queue_config``); ``in_sge60_default`` is False for the five rows 6.2 added.
"""

from __future__ import annotations

__all__ = ["DEFAULT_COMPLEX_ROWS"]

# The columns of ``qconf -sc`` in order, then where values come from and whether 6.0 had the row.
_COLUMNS = (
    "name",
    "shortcut",
    "type",
    "relop",
    "requestable",
    "consumable",
    "default",
    "urgency",
    "origin",
    "in_sge60_default",
)

# One row a line in the column order above, so the table reads like `qconf -sc` output.
_ROWS: tuple[tuple[str | int | bool, ...], ...] = (
    ("arch", "a", "RESTRING", "==", "YES", "NO", "NONE", 0, "host_load", True),
    ("calendar", "c", "RESTRING", "==", "YES", "NO", "NONE", 0, "queue_config", True),
    ("cpu", "cpu", "DOUBLE", ">=", "YES", "NO", "0", 0, "host_load", True),
    ("display_win_gui", "dwg", "BOOL", "==", "YES", "NO", "0", 0, "host_load", False),
    ("h_core", "h_core", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("h_cpu", "h_cpu", "TIME", "<=", "YES", "NO", "0:0:0", 0, "queue_config", True),
    ("h_data", "h_data", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("h_fsize", "h_fsize", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("h_rss", "h_rss", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("h_rt", "h_rt", "TIME", "<=", "YES", "NO", "0:0:0", 0, "queue_config", True),
    ("h_stack", "h_stack", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("h_vmem", "h_vmem", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("hostname", "h", "HOST", "==", "YES", "NO", "NONE", 0, "queue_config", True),
    ("load_avg", "la", "DOUBLE", ">=", "NO", "NO", "0", 0, "host_load", True),
    ("load_long", "ll", "DOUBLE", ">=", "NO", "NO", "0", 0, "host_load", True),
    ("load_medium", "lm", "DOUBLE", ">=", "NO", "NO", "0", 0, "host_load", True),
    ("load_short", "ls", "DOUBLE", ">=", "NO", "NO", "0", 0, "host_load", True),
    ("m_core", "core", "INT", "<=", "YES", "NO", "0", 0, "host_load", False),
    ("m_socket", "socket", "INT", "<=", "YES", "NO", "0", 0, "host_load", False),
    ("m_topology", "topo", "RESTRING", "==", "YES", "NO", "NONE", 0, "host_load", False),
    ("m_topology_inuse", "utopo", "RESTRING", "==", "YES", "NO", "NONE", 0, "host_load", False),
    ("mem_free", "mf", "MEMORY", "<=", "YES", "NO", "0", 0, "host_load", True),
    ("mem_total", "mt", "MEMORY", "<=", "YES", "NO", "0", 0, "host_load", True),
    ("mem_used", "mu", "MEMORY", ">=", "YES", "NO", "0", 0, "host_load", True),
    ("min_cpu_interval", "mci", "TIME", "<=", "NO", "NO", "0:0:0", 0, "queue_config", True),
    ("np_load_avg", "nla", "DOUBLE", ">=", "NO", "NO", "0", 0, "host_load", True),
    ("np_load_long", "nll", "DOUBLE", ">=", "NO", "NO", "0", 0, "host_load", True),
    ("np_load_medium", "nlm", "DOUBLE", ">=", "NO", "NO", "0", 0, "host_load", True),
    ("np_load_short", "nls", "DOUBLE", ">=", "NO", "NO", "0", 0, "host_load", True),
    ("num_proc", "p", "INT", "==", "YES", "NO", "0", 0, "host_load", True),
    ("qname", "q", "RESTRING", "==", "YES", "NO", "NONE", 0, "queue_config", True),
    ("rerun", "re", "BOOL", "==", "NO", "NO", "0", 0, "queue_config", True),
    ("s_core", "s_core", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("s_cpu", "s_cpu", "TIME", "<=", "YES", "NO", "0:0:0", 0, "queue_config", True),
    ("s_data", "s_data", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("s_fsize", "s_fsize", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("s_rss", "s_rss", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("s_rt", "s_rt", "TIME", "<=", "YES", "NO", "0:0:0", 0, "queue_config", True),
    ("s_stack", "s_stack", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("s_vmem", "s_vmem", "MEMORY", "<=", "YES", "NO", "0", 0, "queue_config", True),
    ("seq_no", "seq", "INT", "==", "NO", "NO", "0", 0, "queue_config", True),
    ("slots", "s", "INT", "<=", "YES", "YES", "1", 1000, "queue_config", True),
    ("swap_free", "sf", "MEMORY", "<=", "YES", "NO", "0", 0, "host_load", True),
    ("swap_rate", "sr", "MEMORY", ">=", "YES", "NO", "0", 0, "host_load", True),
    ("swap_rsvd", "srsv", "MEMORY", ">=", "YES", "NO", "0", 0, "host_load", True),
    ("swap_total", "st", "MEMORY", "<=", "YES", "NO", "0", 0, "host_load", True),
    ("swap_used", "su", "MEMORY", ">=", "YES", "NO", "0", 0, "host_load", True),
    ("tmpdir", "tmp", "RESTRING", "==", "NO", "NO", "NONE", 0, "queue_config", True),
    ("virtual_free", "vf", "MEMORY", "<=", "YES", "NO", "0", 0, "host_load", True),
    ("virtual_total", "vt", "MEMORY", "<=", "YES", "NO", "0", 0, "host_load", True),
    ("virtual_used", "vu", "MEMORY", ">=", "YES", "NO", "0", 0, "host_load", True),
)

DEFAULT_COMPLEX_ROWS: tuple[dict[str, str | int | bool], ...] = tuple(
    dict(zip(_COLUMNS, row, strict=True)) for row in _ROWS
)
