"""The host's Grid Engine load values, as an execution daemon (execd) reports them.

What Son of Grid Engine 8.1.9's execd puts in every load report (``sge_get_loadavg()`` and
``sge_build_load_report()`` in ``source/daemons/execd/load_avg.c``), in its forms
(``sge_add_double2load_report()``, ``sge_add_int2load_report()`` and
``sge_add_str2load_report()`` in ``source/daemons/execd/sge_report_execd.c``):

* ``arch``: the architecture string of Grid Engine's ``arch`` script
  (``source/dist/util/arch``), e.g. ``lx-amd64``;
* ``num_proc``: the online processors (``sge_nprocs()``, ``source/libs/uti/sge_nprocs.c``:
  ``sysconf(_SC_NPROCESSORS_ONLN)``), as ``%d``;
* ``load_short``, ``load_medium``, ``load_long``: the 1, 5 and 15 minute load averages
  (``sge_getloadavg()``, ``source/libs/uti/sge_getloadavg.c``: glibc's ``getloadavg()``,
  which reads /proc/loadavg), ``load_avg`` the 5 minute one again, each as ``%f``;
* ``np_load_*``: each load average divided by ``num_proc`` (at least 1), as ``%f``;
* ``mem_*``, ``swap_*``, ``virtual_*``: from /proc/meminfo (``sge_loadmem()``,
  ``source/libs/uti/sge_loadmem.c``), in MiB as ``%fM``: total and free of memory and
  swap, memory free counting ``Buffers`` and ``Cached`` (the kernel gives them back on
  demand), ``virtual`` the two together, ``used`` total minus free.

Names and types are those of Grid Engine's default complex table (complex(5); the rows with
origin ``host_load`` in app/notations/gridengine/default_table.py), which the server seeds.
Where /proc/loadavg cannot be read the load averages come from ``os.getloadavg()``; where
there are none, or no /proc/meminfo, those values are left out, as execd leaves them out.

Standard library only: the agent runs on hosts without the server's stack.
"""

from __future__ import annotations

import os
import platform
import sys
import sysconfig
from pathlib import Path

MEMINFO = Path("/proc/meminfo")
LOADAVG = Path("/proc/loadavg")

#: ``uname -m`` of Linux hosts and the machine part of Grid Engine's ``lx-`` architecture
#: (Son of Grid Engine 8.1.9, ``source/dist/util/arch``, the ``Linux)`` case). ``arm*``
#: and ``mips`` depend on the ABI; see :func:`grid_engine_arch`.
LINUX_MACHINES = {
    "alpha": "alpha",
    "sparc": "sparc",
    "sparc64": "sparc",
    "parisc": "parisc",
    "ia64": "ia64",
    "ppc": "ppc",
    "ppc64": "ppc64",
    "ppc64le": "ppc64le",
    "powerpc": "ppc",
    "powerpc64": "ppc64",
    "powerpc64le": "ppc64el",
    "powerpc64el": "ppc64el",
    "mips64": "mips64",
    "s390": "s390",
    "s390x": "s390x",
    "aarch64": "arm64",
    "x86_64": "amd64",
    "loongarch64": "loong64",
    "riscv64": "riscv64",
}


def grid_engine_arch(
    system: str,
    machine: str,
    *,
    hard_float: bool = False,
    little_endian: bool = True,
    processor: str = "",
) -> str:
    """Grid Engine's architecture string for ``uname -s`` ``system`` and ``uname -m``
    ``machine``, as the ``arch`` script of Son of Grid Engine 8.1.9 forms it: ``lx-amd64``
    for Linux on x86_64, ``lx-arm64`` on aarch64, ``lx-x86`` on i686,
    ``UNSUPPORTED-lx-<machine>`` for a Linux machine it does not know. ``hard_float``
    (32-bit ARM: the hard-float ABI, ``armhf``), ``little_endian`` (``mips``: ``mipsel``)
    and ``processor`` (``uname -p``, for NetBSD and OpenBSD) stand in for what the script
    asks the C compiler and ``uname``. Systems other than Linux, the BSDs and macOS give
    ``UNKNOWN``, the script's default."""
    if system == "Linux":
        if machine.startswith("i") and machine.endswith("86"):  # the script's i*86
            return "lx-x86"
        if machine.startswith("arm"):
            if machine.endswith("b"):
                return "lx-armeb"
            return "lx-armhf" if hard_float else "lx-arm"
        if machine == "mips":
            return "lx-mipsel" if little_endian else "lx-mips"
        known = LINUX_MACHINES.get(machine)
        return f"lx-{known}" if known else f"UNSUPPORTED-lx-{machine}"
    if system in ("FreeBSD", "DragonFly"):
        return f"fbsd-{machine}"
    if system == "NetBSD":
        return f"nbsd-{processor}"
    if system == "OpenBSD":
        return f"obsd-{processor}"
    if system == "Darwin":
        return _darwin_arch(machine, platform.mac_ver()[0])
    return "UNKNOWN"


def _darwin_arch(machine: str, release: str) -> str:
    """The ``Darwin)`` case of the script: ``darwin-x64`` for Intel Macs of 10.2 to 10.10,
    ``darwin-x86`` for 10.1; it knows no later release and no other processor."""
    if machine not in ("i386", "x86_64"):
        return "darwin-unsupported"
    parts = release.split(".")
    if parts[0] != "10" or len(parts) < 2 or not parts[1].isdigit():
        return "darwin-unknown"
    minor = int(parts[1])
    if minor == 1:
        return "darwin-x86"
    return "darwin-x64" if 2 <= minor <= 10 else "darwin-unknown"


def this_arch() -> str:
    """:func:`grid_engine_arch` of this host."""
    multiarch = str(sysconfig.get_config_var("MULTIARCH") or "")
    return grid_engine_arch(
        platform.system(),
        platform.machine(),
        hard_float=multiarch.endswith("gnueabihf"),
        little_endian=sys.byteorder == "little",
        processor=platform.processor(),
    )


def online_processors() -> int:
    """``sysconf(_SC_NPROCESSORS_ONLN)``, as ``sge_nprocs()`` counts them (at least 1)."""
    try:
        count = os.sysconf("SC_NPROCESSORS_ONLN")
    except (ValueError, OSError, AttributeError):
        count = os.cpu_count() or 1
    return max(1, count)


def parse_loadavg(text: str) -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages of /proc/loadavg's text
    (``0.42 0.35 0.30 1/234 5678``), or None where it does not start with three numbers."""
    fields = text.split()[:3]
    try:
        short, medium, long = (float(field) for field in fields)
    except ValueError:
        return None
    return short, medium, long


def _load_averages(loadavg: Path) -> tuple[float, float, float] | None:
    try:
        parsed = parse_loadavg(loadavg.read_text())
    except OSError:
        parsed = None
    if parsed is not None:
        return parsed
    try:
        return os.getloadavg()
    except OSError:  # no load average on this platform
        return None


def parse_meminfo(text: str) -> dict[str, float] | None:
    """Memory and swap in MiB from /proc/meminfo's text, as ``sge_loadmem()`` reads it:
    ``MemTotal``, ``MemFree``, ``SwapTotal``, ``SwapFree``, with ``Buffers`` and ``Cached``
    added to the free memory (lines compared by their start, values in kB divided by
    1024). None without ``MemTotal``."""
    keys = ("MemTotal", "MemFree", "SwapTotal", "SwapFree", "Buffers", "Cached")
    found: dict[str, float] = {}
    for line in text.splitlines():
        for key in keys:
            if line.startswith(key):
                number = line[len(key) :].lstrip(": \t").split(maxsplit=1)
                try:
                    found[key] = float(number[0]) / 1024 if number else 0.0
                except ValueError:
                    found[key] = 0.0
                break
    if "MemTotal" not in found:
        return None
    return {
        "mem_total": found["MemTotal"],
        "mem_free": found.get("MemFree", 0.0)
        + found.get("Buffers", 0.0)
        + found.get("Cached", 0.0),
        "swap_total": found.get("SwapTotal", 0.0),
        "swap_free": found.get("SwapFree", 0.0),
    }


def memory_values(info: dict[str, float]) -> dict[str, str]:
    """The nine memory load values of :func:`parse_meminfo`'s MiB, in execd's ``%fM``."""
    mem_total, mem_free = info["mem_total"], info["mem_free"]
    swap_total, swap_free = info["swap_total"], info["swap_free"]
    values = {
        "mem_free": mem_free,
        "swap_free": swap_free,
        "virtual_free": mem_free + swap_free,
        "mem_total": mem_total,
        "swap_total": swap_total,
        "virtual_total": mem_total + swap_total,
        "mem_used": mem_total - mem_free,
        "swap_used": swap_total - swap_free,
        "virtual_used": (mem_total + swap_total) - (mem_free + swap_free),
    }
    return {name: f"{mib:f}M" for name, mib in values.items()}


def load_report(
    averages: tuple[float, float, float] | None,
    processors: int,
    memory: dict[str, float] | None,
    arch: str,
) -> dict[str, str]:
    """execd's load report of these readings, by Grid Engine attribute name."""
    values: dict[str, str] = {}
    if averages is not None:
        short, medium, long = averages
        values.update(
            {
                "load_avg": f"{medium:f}",
                "load_short": f"{short:f}",
                "load_medium": f"{medium:f}",
                "load_long": f"{long:f}",
            }
        )
    values["arch"] = arch
    values["num_proc"] = f"{processors:d}"
    if memory is not None:
        values.update(memory_values(memory))
    if averages is not None:
        # sge_build_load_report() derives these from the values above.
        nprocs = max(1, processors)
        for name in ("load_avg", "load_short", "load_medium", "load_long"):
            values[f"np_{name}"] = f"{float(values[name]) / nprocs:f}"
    return values


def load_values(meminfo: Path = MEMINFO, loadavg: Path = LOADAVG) -> dict[str, str]:
    """This host's load values by Grid Engine attribute name, as execd reports them."""
    try:
        memory = parse_meminfo(meminfo.read_text())
    except OSError:
        memory = None
    return load_report(_load_averages(loadavg), online_processors(), memory, this_arch())
