"""Reference evaluator: within-level merge, strict hierarchy, defaults, FORCED, EXCL and soft
violation counting (docs/notations/gridengine.md; examples E1, E2 and section 3 of the
2003 Complex Attribute Specification).
"""

from __future__ import annotations

import pytest

from app.notations.gridengine.attribute_table import ComplexTable, default_table
from app.notations.gridengine.definitions import ComplexDefinition
from app.notations.gridengine.evaluator import (
    FitCode,
    Level,
    LevelObject,
    QueueFit,
    Source,
    count_soft_violations,
    evaluate_level,
    evaluate_queue_instance,
    level_offers,
    queue_builtins,
)
from app.notations.gridengine.requests import RequestList, parse_request_list

BASE = default_table()


def table_with(*lines: str, modify: dict[str, dict[str, str]] | None = None) -> ComplexTable:
    definitions = []
    for definition in BASE:
        change = (modify or {}).get(definition.name)
        definitions.append(
            ComplexDefinition.from_row({**definition.to_row(), **change}) if change else definition
        )
    definitions += [ComplexDefinition.from_line(line) for line in lines]
    return ComplexTable(tuple(definitions), builtin_names=BASE.builtin_names)


def queue(
    name: str = "all.q@n1",
    slots: int = 4,
    *,
    builtin: dict[str, str] | None = None,
    complex_values: dict[str, str] | None = None,
    used: dict[str, float] | None = None,
) -> LevelObject:
    return LevelObject(
        name,
        builtin=queue_builtins(name, slots=slots, overrides=builtin),
        complex_values=complex_values or {},
        used=used or {},
    )


GLOBAL = LevelObject("global")
HOST = LevelObject("n1", load_values={"arch": "lx-amd64", "num_proc": "8", "mem_free": "4G"})


def run(
    table: ComplexTable,
    hard: str,
    *,
    global_host: LevelObject = GLOBAL,
    host: LevelObject = HOST,
    queue_instance: LevelObject | None = None,
    soft: str = "",
) -> QueueFit:
    return evaluate_queue_instance(
        table,
        global_host,
        host,
        queue_instance or queue(),
        parse_request_list(hard, table),
        parse_request_list(soft, table, soft=True),
    )


# --- the 2003 specification's examples --------------------------------------------------------


def test_seed_e1_fixed_value_is_per_slot_and_never_decremented() -> None:
    table = table_with("t01 t01 INT <= YES NO 0 0")
    q1 = queue("q1@n1", slots=5, complex_values={"t01": "20"})
    fit = run(table, "t01=10", queue_instance=q1)
    assert fit.fits and fit.queue_slots == 5  # only slots limit; t01 is not consumed
    miss = run(table, "t01=30", queue_instance=q1)
    assert (miss.level, miss.code, miss.attribute) == (Level.QUEUE, FitCode.MISMATCH, "t01")
    assert miss.message == (
        '(-l t01=30) cannot run in queue "q1@n1" because it offers only qf:t01=20'
    )


def test_seed_e2_consumable_slot_capacity_per_queue() -> None:
    table = table_with("t02 t02 INT <= YES YES 0 0")
    for name, slots, expected in (("q2@n1", 5, 2), ("q3@n1", 1, 1), ("q4@n1", 3, 2)):
        fit = run(table, "t02=20", queue_instance=queue(name, slots, complex_values={"t02": "40"}))
        assert fit.fits and fit.queue_slots == expected and fit.slots_avail == expected
    # After the E2 booking q2 has t02=0 left: a further t02=20 job no longer fits there.
    booked = queue("q2@n1", 5, complex_values={"t02": "40"}, used={"t02": 40.0, "slots": 2.0})
    fit = run(table, "t02=20", queue_instance=booked)
    assert (fit.fits, fit.code, fit.attribute) == (False, FitCode.MISMATCH, "t02")
    assert fit.message is not None and "qc:t02=0" in fit.message


# --- within one level (gridengine.md, levels) ---------------------------------------------------


@pytest.mark.parametrize(
    ("custom", "load", "offered", "source"),
    [("1G", "4G", 1024**3, Source.FIXED), ("1G", "0.9G", 0.9 * 1024**3, Source.LOAD)],
)
def test_seed3_more_restrictive_of_custom_and_load_wins(
    custom: str, load: str, offered: float, source: Source
) -> None:
    host = LevelObject("n1", complex_values={"mem_free": custom}, load_values={"mem_free": load})
    (offer,) = level_offers(BASE, host, Level.HOST)["mem_free"]
    assert offer.value == offered and offer.source is source


def test_sge_md_e_ge_relop_keeps_the_larger_value() -> None:
    host = LevelObject("n1", complex_values={"load_avg": "0.5"}, load_values={"la": "1.5"})
    (offer,) = level_offers(BASE, host, Level.HOST)["load_avg"]
    assert offer.value == 1.5 and offer.code == "hl"


def test_sge_md_e_eq_relop_keeps_the_configured_value() -> None:
    host = LevelObject("n1", complex_values={"num_proc": "4"}, load_values={"num_proc": "8"})
    fit = run(BASE, "num_proc=8", host=host)
    assert (fit.level, fit.code) == (Level.HOST, FitCode.MISMATCH)
    assert run(BASE, "num_proc=4", host=host).fits


def test_sge_md_e_string_load_value_replaces_configured() -> None:
    table = table_with(modify={"arch": {"relop": "!="}})
    host = LevelObject("n1", complex_values={"arch": "sol"}, load_values={"arch": "lx"})
    # relop != keeps the configured value
    (offer,) = level_offers(table, host, Level.HOST)["arch"]
    assert offer.value == "sol"
    fresh = LevelObject("n1", load_values={"arch": "lx"})
    (offer,) = level_offers(table, fresh, Level.HOST)["arch"]
    assert offer.value == "lx" and offer.source is Source.LOAD


def test_sge_md_e_queue_builtin_limit_and_complex_values_merge() -> None:
    q = queue(builtin={"h_vmem": "4G"}, complex_values={"h_vmem": "2G"})
    fit = run(BASE, "h_vmem=3G", queue_instance=q)
    assert fit.code is FitCode.MISMATCH
    assert fit.message is not None and fit.message.endswith("qf:h_vmem=2.000G")
    assert run(BASE, "h_vmem=2G", queue_instance=q).fits


def test_sge_md_d_consumable_plus_builtin_limit_both_checked() -> None:
    table = table_with(modify={"h_vmem": {"consumable": "YES"}})
    q = queue(builtin={"h_vmem": "2G"}, complex_values={"h_vmem": "8G"})
    offers = level_offers(table, q, Level.QUEUE)["h_vmem"]
    assert [o.code for o in offers] == ["qc", "qf"]
    fit = run(table, "h_vmem=3G", queue_instance=q)
    assert fit.code is FitCode.MISMATCH and fit.message is not None
    assert "qf:h_vmem=2.000G" in fit.message
    ok = run(table, "h_vmem=1.5G", queue_instance=q)
    assert ok.fits and ok.queue_slots == 4  # min(slots 4, floor(8G / 1.5G) = 5)


def test_sge_md_d_consumable_with_load_value_checks_both() -> None:
    table = table_with(modify={"virtual_free": {"consumable": "YES"}})
    host = LevelObject(
        "n1", complex_values={"virtual_free": "8G"}, load_values={"virtual_free": "1G"}
    )
    fit = run(table, "vf=2G", host=host)
    assert (fit.level, fit.code) == (Level.HOST, FitCode.MISMATCH)
    ok = run(table, "vf=512M", host=host)
    assert ok.fits and ok.host_slots == 16  # slot count from capacity alone (gridengine.md)


# --- across levels: the strict hierarchy -------------------------------------------------------


def test_sge_md_e_lower_level_cannot_relax_an_upper_level() -> None:
    global_host = LevelObject("global", complex_values={"h_vmem": "1G"})
    q = queue(builtin={"h_vmem": "8G"})
    fit = run(BASE, "h_vmem=2G", global_host=global_host, queue_instance=q)
    assert (fit.level, fit.code) == (Level.GLOBAL, FitCode.MISMATCH)
    assert fit.message is not None and "cannot run globally because" in fit.message


def test_sge_md_e_every_level_defining_an_attribute_must_match() -> None:
    q = queue(complex_values={"arch": "sol-amd64"})
    host_fail = run(BASE, "arch=sol*", queue_instance=q)
    assert (host_fail.level, host_fail.code) == (Level.HOST, FitCode.MISMATCH)
    assert host_fail.message is not None and 'at host "n1"' in host_fail.message
    queue_fail = run(BASE, "arch=lx*", queue_instance=q)
    assert queue_fail.level is Level.QUEUE
    assert run(BASE, "arch=*64").fits


def test_sge_md_e_unknown_resource_after_queue_level() -> None:
    table = table_with("fpga fpga BOOL == YES NO 0 0")
    fit = run(table, "fpga")
    assert (fit.level, fit.code, fit.attribute) == (Level.QUEUE, FitCode.UNKNOWN_RESOURCE, "fpga")
    assert fit.message == (
        '(-l fpga=TRUE) cannot run in queue "all.q@n1" because job requests unknown resource (fpga)'
    )
    host = LevelObject("n1", load_values={"fpga": "1"})
    assert run(table, "fpga", host=host).fits


def test_sge_md_e_queue_builtins_answer_limits_qname_hostname() -> None:
    q = queue("short.q@n1", builtin={"h_rt": "1:00:00"})
    assert run(BASE, "h_rt=0:30:0,q=short.q,h=N1", queue_instance=q).fits
    fit = run(BASE, "h_rt=2:00:00", queue_instance=q)
    assert fit.message is not None and fit.message.endswith("qf:h_rt=01:00:00")
    assert run(BASE, "q=all.q", queue_instance=q).code is FitCode.MISMATCH


# --- slots, defaults, FORCED, EXCL -------------------------------------------------------------


def test_sge_md_c_slots_default_books_one_slot() -> None:
    full = queue(used={"slots": 4.0})
    fit = run(BASE, "", queue_instance=full)
    assert (fit.code, fit.attribute) == (FitCode.NO_FREE_SLOTS, "slots")
    assert fit.message == 'queue instance "all.q@n1" dropped because it is full'
    global_host = LevelObject("global", complex_values={"slots": "10"}, used={"slots": 10.0})
    fit = run(BASE, "", global_host=global_host)
    assert (fit.level, fit.code) == (Level.GLOBAL, FitCode.NO_FREE_SLOTS)
    roomy = LevelObject("global", complex_values={"slots": "10"}, used={"slots": 7.0})
    assert run(BASE, "", global_host=roomy).global_slots == 3


def test_sge_md_c_defaults_apply_only_where_capacity_exists() -> None:
    table = table_with("scratch scr MEMORY <= YES YES 1G 0")
    small = LevelObject("n1", complex_values={"scratch": "512M"})
    fit = run(table, "", host=small)
    assert (fit.level, fit.code) == (Level.HOST, FitCode.DEFAULT_REQUEST_MISMATCH)
    assert (
        fit.message is not None and "for default request it offers only hc:scratch" in fit.message
    )
    assert run(table, "scratch=256M", host=small).fits
    assert run(table, "").fits  # no capacity anywhere: the default is not applied


def test_sge_md_c_zero_default_is_ignored() -> None:
    table = table_with("lic lic INT <= YES YES 0 0")
    empty = LevelObject("global", complex_values={"lic": "0"})
    assert run(table, "", global_host=empty).fits
    assert run(table, "lic=1", global_host=empty).code is FitCode.MISMATCH


def test_sge_md_c_non_requestable_consumable_default_still_applies() -> None:
    table = table_with("tok tok INT <= NO YES 2 0")
    host = LevelObject("n1", complex_values={"tok": "1"})
    assert run(table, "", host=host).code is FitCode.DEFAULT_REQUEST_MISMATCH


def test_sge_md_c_forced_attribute_must_be_hard_requested_where_present() -> None:
    table = table_with("gputype gt STRING == FORCED NO NONE 0")
    q = queue(complex_values={"gputype": "a100"})
    fit = run(table, "", queue_instance=q)
    assert (fit.level, fit.code, fit.attribute) == (
        Level.QUEUE,
        FitCode.FORCED_NOT_REQUESTED,
        "gputype",
    )
    assert (
        fit.message == "does not request 'forced' resource \"gputype\" of queue instance all.q@n1"
    )
    assert run(table, "", queue_instance=q, soft="gt=a100").code is FitCode.FORCED_NOT_REQUESTED
    assert run(table, "gt=a*", queue_instance=q).fits
    assert run(table, "").fits  # not present anywhere: nothing forced


def test_sge_md_c_forced_builtin_forces_every_queue() -> None:
    table = table_with(modify={"h_rt": {"requestable": "FORCED"}})
    assert run(table, "").code is FitCode.FORCED_NOT_REQUESTED
    assert run(table, "h_rt=100").fits


def test_sge_md_d_excl_exclusive_and_non_exclusive_jobs() -> None:
    table = table_with("exclusive excl BOOL EXCL YES YES 0 1000")

    def host(exclusive: float, others: float) -> LevelObject:
        return LevelObject(
            "n1",
            complex_values={"exclusive": "true"},
            used={"exclusive": exclusive},
            used_nonexclusive={"exclusive": others},
        )

    assert run(table, "exclusive=true", host=host(0, 0)).fits
    busy = run(table, "excl", host=host(0, 1))
    assert (busy.code, busy.level) == (FitCode.EXCLUSIVE_IN_USE, Level.HOST)
    assert busy.message is not None and "exclusive resource (exclusive) is already in use" in (
        busy.message
    )
    assert run(table, "", host=host(0, 3)).fits
    assert run(table, "", host=host(1, 0)).code is FitCode.EXCLUSIVE_IN_USE
    off = LevelObject("n1", complex_values={"exclusive": "false"})
    assert run(table, "excl", host=off).code is FitCode.MISMATCH


def test_sge_md_d_job_consumable_does_not_limit_slot_count() -> None:
    table = table_with("lic lic INT <= YES JOB 0 0")
    global_host = LevelObject("global", complex_values={"lic": "1"})
    fit = run(table, "lic=1", global_host=global_host)
    assert fit.fits and fit.global_slots is None
    taken = LevelObject("global", complex_values={"lic": "1"}, used={"lic": 1.0})
    assert run(table, "lic=1", global_host=taken).code is FitCode.MISMATCH


# --- soft requests (gridengine.md) --------------------------------------------------------------


@pytest.mark.parametrize(
    ("soft", "global_values", "faithful", "naive"),
    [
        ("arch=lx*", {}, 0, 0),  # matched at host, absent on the queue: satisfied
        ("arch=sol*", {}, 2, 1),  # host mismatch + "not found" at the queue: counts twice
        ("fpga=true", {}, 1, 1),  # defined nowhere
        ("arch=sol*", {"arch": "hp"}, 3, 1),  # global + host mismatch + not found
        ("num_proc=8,arch=sol*", {}, 2, 1),
    ],
)
def test_sge_md_f_soft_violations_faithful_and_naive(
    soft: str, global_values: dict[str, str], faithful: int, naive: int
) -> None:
    table = table_with("fpga fpga BOOL == YES NO 0 0")
    global_host = LevelObject("global", complex_values=global_values)
    fit = run(table, "", global_host=global_host, soft=soft)
    assert fit.fits
    assert (fit.soft_violations, fit.soft_violations_naive) == (faithful, naive)


def test_sge_md_f_soft_mismatch_on_the_queue_counts_once() -> None:
    q = queue(complex_values={"arch": "sol"})
    soft = parse_request_list("arch=lx*", BASE, soft=True)
    assert count_soft_violations(BASE, (GLOBAL, LevelObject("n1"), q), soft) == (1, 1)


def test_sge_md_f_malformed_soft_expression_never_matches_with_eq() -> None:
    fit = run(BASE, "", soft="arch=lx*|")
    assert fit.fits and fit.soft_violations == 2


def test_evaluate_level_reports_found_requests() -> None:
    hard = parse_request_list("arch=lx*,h_rt=10", BASE)
    fit = evaluate_level(BASE, Level.HOST, HOST, hard)
    assert fit.ok and fit.found == {"arch"}
    empty = evaluate_level(BASE, Level.GLOBAL, GLOBAL, RequestList(()))
    assert empty.ok and empty.slots is None


def test_queue_builtins_defaults() -> None:
    values = queue_builtins("long.q@node7", slots=2, seq_no=3, overrides={"h_rt": "8:00:00"})
    assert values["qname"] == "long.q" and values["hostname"] == "node7"
    assert values["slots"] == "2" and values["seq_no"] == "3"
    assert values["h_rt"] == "8:00:00" and values["h_vmem"] == "INFINITY"
