"""The host's Grid Engine load values, as an execution daemon (execd) reports them.

Names and meanings follow Grid Engine's default complex table (complex(5); the rows with
origin ``host_load`` in app/notations/gridengine/default_table.py): ``load_short``,
``load_medium`` and ``load_long`` are the 1, 5 and 15 minute load averages, ``load_avg``
is the 5 minute one, the ``np_`` variants are divided by ``num_proc`` (the processors),
and the memory values are in bytes. Memory is read from Linux's /proc/meminfo; where there
is none, only the load averages and num_proc are reported.

Standard library only: the agent runs on hosts without the server's stack.
"""

from __future__ import annotations

import os
from pathlib import Path

MEMINFO = Path("/proc/meminfo")


def _meminfo(path: Path) -> dict[str, int]:
    """/proc/meminfo's fields in bytes (its values are in kB); empty where it cannot be read."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    fields: dict[str, int] = {}
    for line in lines:
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            fields[name.strip()] = int(parts[0]) * 1024
    return fields


def _memory_values(info: dict[str, int]) -> dict[str, int]:
    if "MemTotal" not in info or "MemFree" not in info:
        return {}
    mem_total = info["MemTotal"]
    # Page cache and buffers are given back on demand: free for a job that starts now.
    mem_free = info.get("MemAvailable", info["MemFree"] + info.get("Buffers", 0))
    swap_total, swap_free = info.get("SwapTotal", 0), info.get("SwapFree", 0)
    return {
        "mem_total": mem_total,
        "mem_free": mem_free,
        "mem_used": mem_total - mem_free,
        "swap_total": swap_total,
        "swap_free": swap_free,
        "swap_used": swap_total - swap_free,
        "virtual_total": mem_total + swap_total,
        "virtual_free": mem_free + swap_free,
        "virtual_used": mem_total - mem_free + swap_total - swap_free,
    }


def load_values(meminfo: Path = MEMINFO) -> dict[str, str]:
    """This host's load values by Grid Engine attribute name, as text (the values API's
    form): load averages with two decimals, counts and bytes as integers."""
    processors = os.cpu_count() or 1
    values: dict[str, str] = {"num_proc": str(processors)}
    try:
        short, medium, long = os.getloadavg()
    except OSError:  # no load average on this platform
        averages: dict[str, float] = {}
    else:
        averages = {"load_short": short, "load_medium": medium, "load_long": long}
        averages["load_avg"] = medium
    for name, value in averages.items():
        values[name] = f"{value:.2f}"
        values[f"np_{name}"] = f"{value / processors:.2f}"
    values.update({name: str(size) for name, size in _memory_values(_meminfo(meminfo)).items()})
    return values
