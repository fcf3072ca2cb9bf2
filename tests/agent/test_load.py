"""The agent's load report is what Grid Engine's execution daemon reports (issue 35): the
same attributes, read the same way from /proc, in the same forms.

Upstream: Son of Grid Engine 8.1.9 (github.com/daimh/sge, which continues it); the 2012
Grid Engine tree (github.com/gridengine/gridengine) has the same load report and memory
reading, and an older ``arch`` script without aarch64. Each attribute's source is named in
:data:`UPSTREAM`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.agent.load import (
    grid_engine_arch,
    load_report,
    load_values,
    memory_values,
    parse_loadavg,
    parse_meminfo,
)
from app.notations.gridengine.attribute_table import default_table
from app.notations.gridengine.default_table import DEFAULT_COMPLEX_ROWS
from app.notations.gridengine.values import parse_value

_EXECD = "source/daemons/execd/load_avg.c"
_LOADMEM = "source/libs/uti/sge_loadmem.c, sge_loadmem() (Linux: /proc/meminfo, kB / 1024)"
_DOUBLE = "source/daemons/execd/sge_report_execd.c, sge_add_double2load_report() (%f, units)"

#: Each load value the agent reports: where execd computes it, and how it prints it.
UPSTREAM = {
    "arch": (
        f"{_EXECD}, sge_get_loadavg(): sge_get_arch()",
        "source/dist/util/arch (the architecture string); sge_add_str2load_report()",
    ),
    "num_proc": (
        f"{_EXECD}, sge_get_loadavg(): sge_nprocs()",
        "source/libs/uti/sge_nprocs.c (sysconf(_SC_NPROCESSORS_ONLN)); "
        "sge_report_execd.c, sge_add_int2load_report() (%d)",
    ),
    "load_avg": (f"{_EXECD}, sge_get_loadavg(): avg[1]", _DOUBLE),
    "load_short": (f"{_EXECD}, sge_get_loadavg(): avg[0]", _DOUBLE),
    "load_medium": (f"{_EXECD}, sge_get_loadavg(): avg[1]", _DOUBLE),
    "load_long": (f"{_EXECD}, sge_get_loadavg(): avg[2]", _DOUBLE),
    "np_load_avg": (f"{_EXECD}, sge_build_load_report(): load_avg / num_proc", _DOUBLE),
    "np_load_short": (f"{_EXECD}, sge_build_load_report(): load_short / num_proc", _DOUBLE),
    "np_load_medium": (f"{_EXECD}, sge_build_load_report(): load_medium / num_proc", _DOUBLE),
    "np_load_long": (f"{_EXECD}, sge_build_load_report(): load_long / num_proc", _DOUBLE),
    "mem_total": (f"{_EXECD}, sge_get_loadavg(): MemTotal; {_LOADMEM}", _DOUBLE + " M"),
    "mem_free": (
        f"{_EXECD}, sge_get_loadavg(): MemFree + Buffers + Cached; {_LOADMEM}",
        _DOUBLE + " M",
    ),
    "mem_used": (f"{_EXECD}, sge_get_loadavg(): mem_total - mem_free", _DOUBLE + " M"),
    "swap_total": (f"{_EXECD}, sge_get_loadavg(): SwapTotal; {_LOADMEM}", _DOUBLE + " M"),
    "swap_free": (f"{_EXECD}, sge_get_loadavg(): SwapFree; {_LOADMEM}", _DOUBLE + " M"),
    "swap_used": (f"{_EXECD}, sge_get_loadavg(): swap_total - swap_free", _DOUBLE + " M"),
    "virtual_total": (f"{_EXECD}, sge_get_loadavg(): mem_total + swap_total", _DOUBLE + " M"),
    "virtual_free": (f"{_EXECD}, sge_get_loadavg(): mem_free + swap_free", _DOUBLE + " M"),
    "virtual_used": (
        f"{_EXECD}, sge_get_loadavg(): (mem_total + swap_total) - (mem_free + swap_free)",
        _DOUBLE + " M",
    ),
}

#: A workstation's /proc/meminfo (Linux 6.1, 16 GB, 2 GB swap), as the kernel writes it.
MEMINFO = """\
MemTotal:       16303428 kB
MemFree:         8020108 kB
MemAvailable:   12874012 kB
Buffers:          402412 kB
Cached:          4296516 kB
SwapCached:        10240 kB
Active:          4911876 kB
Inactive:        2612488 kB
Active(anon):    2890112 kB
Inactive(anon):    98360 kB
Active(file):    2021764 kB
Inactive(file):  2514128 kB
Unevictable:       32556 kB
Mlocked:           32556 kB
SwapTotal:       2097148 kB
SwapFree:        2045436 kB
Zswap:                 0 kB
Zswapped:              0 kB
Dirty:               684 kB
Writeback:             0 kB
AnonPages:       2857064 kB
Mapped:           938124 kB
Shmem:            165092 kB
KReclaimable:     312852 kB
Slab:             498732 kB
SReclaimable:     312852 kB
SUnreclaim:       185880 kB
KernelStack:       14624 kB
PageTables:        38932 kB
CommitLimit:    10248860 kB
Committed_AS:    9865236 kB
VmallocTotal:   34359738367 kB
VmallocUsed:       62580 kB
HugePages_Total:       0
HugePages_Free:        0
Hugepagesize:       2048 kB
"""

#: The same host's /proc/loadavg: 1, 5 and 15 minute averages, runnable/all, last pid.
LOADAVG = "0.52 0.58 0.59 2/1043 412877\n"

#: What execd reports of these two files on a 4-processor x86_64 Linux host.
EXPECTED = {
    "arch": "lx-amd64",
    "num_proc": "4",
    "load_avg": "0.580000",
    "load_short": "0.520000",
    "load_medium": "0.580000",
    "load_long": "0.590000",
    "np_load_avg": "0.145000",
    "np_load_short": "0.130000",
    "np_load_medium": "0.145000",
    "np_load_long": "0.147500",
    "mem_total": "15921.316406M",
    "mem_free": "12420.933594M",
    "mem_used": "3500.382812M",
    "swap_total": "2047.996094M",
    "swap_free": "1997.496094M",
    "swap_used": "50.500000M",
    "virtual_total": "17969.312500M",
    "virtual_free": "14418.429688M",
    "virtual_used": "3550.882812M",
}


def _report() -> dict[str, str]:
    return load_report(parse_loadavg(LOADAVG), 4, parse_meminfo(MEMINFO), "lx-amd64")


def test_the_report_of_a_host_is_execds_in_its_forms() -> None:
    """Every attribute of the load report, with the value execd prints for the fixture
    (memory in MiB with six decimals and ``M``, loads with six decimals, num_proc %d)."""
    assert _report() == EXPECTED


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_each_value_has_its_upstream_source_and_a_default_complex(name: str) -> None:
    """Each reported value is one execd reports (:data:`UPSTREAM` names where), and a
    host load attribute of Grid Engine's default complex table the server seeds, whose
    type parses it (MEMORY, DOUBLE, INT, RESTRING)."""
    assert name in _report()
    rows = {row["name"]: row for row in DEFAULT_COMPLEX_ROWS}
    assert rows[name]["origin"] == "host_load"
    definition = default_table()[name]
    parsed = parse_value(definition, _report()[name], role="load")
    if definition.type.is_numeric:
        assert isinstance(parsed, float)


def test_the_agent_reports_every_value_execd_reports_and_no_other() -> None:
    assert set(_report()) == set(UPSTREAM)


def test_meminfo_is_read_as_sge_loadmem_reads_it() -> None:
    """MiB of kB / 1024; free memory counts Buffers and Cached (not SwapCached, not
    MemAvailable); lines compared by how they start."""
    info = parse_meminfo(MEMINFO)
    assert info == {
        "mem_total": 16303428 / 1024,
        "mem_free": (8020108 + 402412 + 4296516) / 1024,
        "swap_total": 2097148 / 1024,
        "swap_free": 2045436 / 1024,
    }
    assert memory_values(info)["virtual_used"] == "3550.882812M"
    # A container's meminfo without swap lines: no swap, as execd's zeroed structure says.
    bare = parse_meminfo("MemTotal: 2048 kB\nMemFree: 1024 kB\n")
    assert bare == {"mem_total": 2.0, "mem_free": 1.0, "swap_total": 0.0, "swap_free": 0.0}
    assert parse_meminfo("nothing here\n") is None


def test_loadavg_gives_the_three_averages() -> None:
    assert parse_loadavg(LOADAVG) == (0.52, 0.58, 0.59)
    assert parse_loadavg("") is None
    assert parse_loadavg("0.5 x 0.1") is None


def test_a_host_without_load_averages_or_memory_reports_arch_and_num_proc() -> None:
    """sge_get_loadavg(): no load averages (sge_getloadavg() < 0) leaves them and their
    np_ values out; a failed sge_loadmem() leaves the memory values out."""
    assert load_report(None, 2, None, "lx-arm64") == {"arch": "lx-arm64", "num_proc": "2"}


def test_load_values_read_the_files(tmp_path: Path) -> None:
    meminfo, loadavg = tmp_path / "meminfo", tmp_path / "loadavg"
    meminfo.write_text(MEMINFO)
    loadavg.write_text(LOADAVG)
    values = load_values(meminfo, loadavg)
    for name in ("mem_total", "mem_free", "swap_used", "load_short", "load_long"):
        assert values[name] == EXPECTED[name]
    assert int(values["num_proc"]) >= 1
    assert values["np_load_short"] == f"{0.52 / int(values['num_proc']):f}"
    # No /proc files: the load averages come from os.getloadavg(), memory is left out.
    absent = load_values(tmp_path / "no-meminfo", tmp_path / "no-loadavg")
    assert "mem_free" not in absent and {"arch", "num_proc"} <= set(absent)


@pytest.mark.parametrize(
    ("system", "machine", "options", "arch"),
    [
        ("Linux", "x86_64", {}, "lx-amd64"),
        ("Linux", "aarch64", {}, "lx-arm64"),
        ("Linux", "i686", {}, "lx-x86"),
        ("Linux", "i386", {}, "lx-x86"),
        ("Linux", "armv7l", {"hard_float": True}, "lx-armhf"),
        ("Linux", "armv7l", {}, "lx-arm"),
        ("Linux", "armv5tejb", {}, "lx-armeb"),
        ("Linux", "ppc64le", {}, "lx-ppc64le"),
        ("Linux", "powerpc64le", {}, "lx-ppc64el"),
        ("Linux", "s390x", {}, "lx-s390x"),
        ("Linux", "riscv64", {}, "lx-riscv64"),
        ("Linux", "loongarch64", {}, "lx-loong64"),
        ("Linux", "sparc64", {}, "lx-sparc"),
        ("Linux", "mips", {"little_endian": True}, "lx-mipsel"),
        ("Linux", "mips", {"little_endian": False}, "lx-mips"),
        ("Linux", "vax", {}, "UNSUPPORTED-lx-vax"),
        ("FreeBSD", "amd64", {}, "fbsd-amd64"),
        ("NetBSD", "amd64", {"processor": "x86_64"}, "nbsd-x86_64"),
        ("OpenBSD", "amd64", {"processor": "amd64"}, "obsd-amd64"),
        ("Darwin", "arm64", {}, "darwin-unsupported"),
        ("Plan9", "x86_64", {}, "UNKNOWN"),
    ],
)
def test_arch_is_the_arch_scripts(
    system: str, machine: str, options: dict[str, bool | str], arch: str
) -> None:
    """Son of Grid Engine 8.1.9, source/dist/util/arch: ``uname -s`` and ``uname -m``
    to the architecture string (the ``Linux)`` case: ``lx-`` and the machine's name,
    ``x86_64`` as ``amd64``, ``aarch64`` as ``arm64``, ``i*86`` as ``x86``, ``arm*`` as
    ``armhf`` with the hard-float ABI, ``mips`` with ``el`` when little-endian)."""
    assert grid_engine_arch(system, machine, **options) == arch  # type: ignore[arg-type]
