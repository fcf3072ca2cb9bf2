"""The referee's translation of scenario cases to Grid Engine's files and command lines
(conformance/gridengine/translate.py), without a Grid Engine: per-host queue values
(queue_conf(5) ``[host=value]``), qsub argument order (qsub(1): ``-soft`` makes every
later ``-l``/``-q`` soft), the attribute table merge, the load sensor's values (recorded
from Son of Grid Engine 8.1.9 (Debian 8.1.9+dfsg-10+b1): np_load_avg is load_avg over
num_proc) and the queue sort ties the referee refuses."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.gridengine import translate

TEMPLATE = (
    "qname template\nhostlist NONE\nseq_no 0\nload_thresholds np_load_avg=1.75\n"
    "pe_list make\nslots 1\ncomplex_values NONE\nshell /bin/sh\n"
)
HOSTS = {"h1": "vm", "h2": "h2"}


def _queue(name: str, slots: int, seq_no: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "host": name.partition("@")[2], "slots": slots, "seq_no": seq_no, **extra}


def test_instances_that_differ_become_per_host_values_of_their_cluster_queue() -> None:
    case = {
        "cluster": {
            "queues": [
                _queue("all.q@h1", 2, 1, complex_values={"lic": 2}),
                _queue("all.q@h2", 4, 0),
            ]
        },
        "jobs": [{"pe": {"name": "mpi"}, "slots": 2}],
    }
    (text,) = translate.queue_files(case, HOSTS, TEMPLATE, ["mpi"]).values()
    fields = dict(line.split(" ", 1) for line in text.splitlines())
    assert fields == {
        "qname": "all.q",
        "hostlist": "vm h2",
        "seq_no": "1,[h2=0]",
        "load_thresholds": "NONE",
        "pe_list": "mpi",
        "slots": "2,[h2=4]",
        "complex_values": "lic=2,[h2=NONE]",
        "shell": "/bin/sh",
    }


def test_hard_requests_and_queue_lists_come_before_soft_ones() -> None:
    case = {
        "cluster": {"queues": [_queue("q@h1", 4)]},
        "jobs": [
            {
                "user": "alice",
                "hard": [["lic", "1"], ["arch", None]],
                "soft": [["mem", "2G"]],
                "hard_queue_list": ["q@h1"],
                "soft_queue_list": "q@h2",
                "master_queue_list": ["q"],
                "pe": {"name": "mpi", "allocation_rule": "$fill_up"},
                "slots": "2-4",
                "project": "p1",
                "verify": "e",
            },
            {},
        ],
    }
    first, second = translate.qsub_jobs(case, HOSTS)
    assert first == translate.Job(
        "alice",
        (
            "-l", "lic=1,arch", "-q", "q@vm", "-masterq", "q", "-pe", "mpi", "2-4",
            "-P", "p1", "-w", "e", "-soft", "-l", "mem=2G", "-q", "q@h2",
        ),
    )  # fmt: skip
    assert second == translate.Job(translate.DEFAULT_USER, ())


def test_a_job_key_the_referee_does_not_translate_is_a_case_error() -> None:
    case = {"cluster": {"queues": [_queue("q@h1", 1)]}, "job": {"priority": 5}}
    with pytest.raises(translate.CaseError, match="priority"):
        translate.qsub_jobs(case, HOSTS)


def test_complex_mod_merges_into_the_stock_row_and_complex_add_appends() -> None:
    stock = (
        "#name shortcut type relop requestable consumable default urgency\n"
        "slots s INT <= YES YES 1 1000\n"
    )
    case = {
        "complex_mod": [{"name": "s", "urgency": 0}],
        "complex_add": [
            {"name": "lic", "shortcut": "l", "type": "INT", "relop": "<=",
             "requestable": "YES", "consumable": "JOB", "default": "0"},
        ],
    }  # fmt: skip
    assert translate.complex_table(stock, case) == (
        "slots s INT <= YES YES 1 0\nlic l INT <= YES JOB 0 0\n"
    )
    assert translate.complex_table(stock, {}) is None


def test_np_load_avg_is_reported_as_load_avg_times_num_proc() -> None:
    assert translate.sensor_values({"np_load_avg": 0.25, "custom": 3}, 2) == {
        "load_avg": "0.5",
        "custom": "3",
        "num_proc": "2",
    }
    assert translate.sensor_values({"np_load_avg": 0.5, "num_proc": 4}, 2)["load_avg"] == "2.0"


def test_a_case_needing_a_host_this_machine_lacks_is_not_refereeable() -> None:
    case = {"cluster": {"queues": [_queue("q@h1", 1), _queue("q@h3", 1)]}, "jobs": [{}]}
    with pytest.raises(translate.NotRefereeable, match="h3"):
        translate.host_map(case, HOSTS)


def test_equal_seq_no_on_two_hosts_needs_their_loads_in_list_order() -> None:
    queues = [_queue("q@h1", 1), _queue("q@h2", 1)]
    assert "load" in (translate.tie_problem({"cluster": {"queues": queues}}, {}) or "")
    loaded = [
        {"name": "h1", "load_values": {"np_load_avg": 0.5}},
        {"name": "h2", "load_values": {"np_load_avg": 0.1}},
    ]
    case = {"cluster": {"hosts": loaded, "queues": queues}}
    assert translate.pinned_loads(case) == {}  # the case's own load counts
    assert "increasing" in (translate.tie_problem(case, {}) or "")
    loaded[1]["load_values"] = {"np_load_avg": 0.9}
    assert translate.tie_problem(case, {}) is None
    # One host: Grid Engine keeps the cluster queues' creation order, the case's list order.
    one_host = [_queue("b.q@h1", 1), _queue("a.q@h1", 1)]
    assert translate.tie_problem({"cluster": {"queues": one_host}}, {}) is None


def test_a_case_silent_about_load_gets_host_loads_in_list_order() -> None:
    queues = [_queue("a.q@h2", 1), _queue("a.q@h1", 1), _queue("b.q@h1", 1, 1)]
    case = {"cluster": {"queues": queues}}
    pinned = translate.pinned_loads(case)
    assert pinned == {"h2": 0.01, "h1": 0.02}
    assert translate.tie_problem(case, pinned) is None
    # Two seq_no that order the hosts both ways: no load order fits.
    crossed = [*queues, _queue("c.q@h1", 1, 2), _queue("c.q@h2", 1, 2)]
    assert translate.pinned_loads({"cluster": {"queues": crossed}}) == {}
    # A case with load thresholds keeps the machine's load (and the tie is its error).
    thresholds = [_queue("q@h1", 1, load_thresholds="np_load_avg=1"), _queue("q@h2", 1)]
    assert translate.pinned_loads({"cluster": {"queues": thresholds}}) == {}


def test_host_names_map_as_whole_words_only() -> None:
    text = "limit hosts {h1,h2} queues all.q@h1 to slots=1 # h10 xh1"
    assert translate.map_hosts_in_text(text, HOSTS) == (
        "limit hosts {vm,h2} queues all.q@vm to slots=1 # h10 xh1"
    )
    assert translate.logical_queue("all.q@vm", HOSTS) == "all.q@h1"
