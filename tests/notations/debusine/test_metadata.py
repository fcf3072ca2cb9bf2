"""debusine worker metadata and task requirements, pure (debusine issue #8,
docs/notations/debusine.md)."""

from __future__ import annotations

import pytest

from app.notations.debusine.metadata import (
    MetadataError,
    RequirementError,
    canonical_requirement,
    describe_failure,
    effective,
    evaluate,
    flatten_dynamic,
    parse_dynamic,
    parse_requirement,
    parse_static,
    requirement_to_json,
    task_allowed,
)


def test_static_metadata_wins_over_dynamic_without_deep_merge() -> None:
    """debusine issue #8: "The static data set by the admin takes precedence over the dynamic
    metadata"; debusine's merge is shallow (``Worker.metadata()``)."""
    dynamic = {"system:architectures": ["amd64", "i386"], "system:cpu_count": 4}
    static = {"system:architectures": ["amd64"]}
    assert effective(static, dynamic) == {
        "system:architectures": ["amd64"],
        "system:cpu_count": 4,
    }


def test_effective_metadata_is_a_deep_copy_of_its_inputs() -> None:
    """debusine's ``test_metadata_is_deep_copy`` (debusine/db/models/tests, the worker model's
    tests): a list put into the dynamic metadata, appended to through the merged metadata,
    stays as it was in the dynamic metadata; the same holds for the static side."""
    dynamic: dict[str, object] = {"list": ["foo", "bar"], "system:cpu_count": 4}
    static: dict[str, object] = {"pools": ["a"]}
    merged = effective(static, dynamic)
    merged["list"].append("baz")  # type: ignore[attr-defined]
    merged["pools"].append("b")  # type: ignore[attr-defined]
    assert dynamic["list"] == ["foo", "bar"]
    assert static["pools"] == ["a"]
    assert merged == {"list": ["foo", "bar", "baz"], "system:cpu_count": 4, "pools": ["a", "b"]}


def test_dynamic_metadata_is_namespaced_by_task_with_version_default_1() -> None:
    """debusine issue #8: metadata namespaced to the task name, a plain integer version, 1 when the
    task sets none."""
    report = parse_dynamic({"sbuild": {"chroots": ["bookworm"]}, "autopkgtest": {"version": 3}})
    assert report["sbuild"].version == 1
    assert report["autopkgtest"].version == 3
    assert flatten_dynamic(report) == {
        "sbuild:version": 1,
        "sbuild:chroots": ["bookworm"],
        "autopkgtest:version": 3,
    }


@pytest.mark.parametrize(
    ("report", "fragment"),
    [
        ({"sbuild": {"version": "2"}}, "plain integer"),
        ({"sbuild": {"version": True}}, "plain integer"),
        ({"sbuild": {"version": 0}}, "out of range"),
        ({"Sbuild": {}}, "invalid namespace"),
        ({"a:b": {}}, "invalid namespace"),
        ({"sbuild": []}, "must be an object"),
        ({"tasks_allowlist": {}}, "cannot report it"),
        ({"sbuild": {"bad key": 1}}, "invalid key"),
        ({"sbuild": {"n": 2**60}}, "too large"),
        ([], "must be a JSON object"),
    ],
)
def test_dynamic_metadata_errors(report: object, fragment: str) -> None:
    with pytest.raises(MetadataError) as caught:
        parse_dynamic(report)
    assert fragment in str(caught.value)
    assert caught.value.notation == "debusine-metadata"


@pytest.mark.parametrize(
    ("static", "fragment"),
    [
        ({"tasks_allowlist": "sbuild"}, "list of task names"),
        ({"tasks_denylist": ["Not A Name"]}, "invalid task name"),
        ({"sbuild:version": 2}, "reported by the worker"),
        ({"": 1}, "invalid key"),
        ({"a::b": 1}, "invalid key"),
        ("x", "must be a JSON object"),
    ],
)
def test_static_metadata_errors(static: object, fragment: str) -> None:
    with pytest.raises(MetadataError) as caught:
        parse_static(static)
    assert fragment in str(caught.value)


def test_allowlist_when_present_is_the_whole_list() -> None:
    """debusine issue #8: "If tasks_allowlist is present, then that's the list of tasks to use";
    debusine ignores the denylist then, and an empty allowlist allows nothing."""
    static = {"tasks_allowlist": ["sbuild"], "tasks_denylist": ["sbuild", "lintian"]}
    assert task_allowed("sbuild", static)
    assert not task_allowed("lintian", static)
    assert not task_allowed("sbuild", {"tasks_allowlist": []})


def test_without_allowlist_all_tasks_but_the_denied() -> None:
    """debusine issue #8: "Otherwise all tasks are used except those listed in tasks_denylist"."""
    static = {"tasks_denylist": ["lintian"]}
    assert task_allowed("sbuild", static)
    assert not task_allowed("lintian", static)
    assert task_allowed("anything", {})


METADATA = {
    "system:architecture": "amd64",
    "system:cpu_count": 8,
    "system:memory": 16.5,
    "system:kvm": True,
    "system:architectures": ["amd64", "i386", 1, True],
    "sbuild:chroots": ["bookworm", "trixie"],
    "sbuild:version": 2,
    "nothing": None,
}


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        ({"eq": ["system:architecture", "amd64"]}, True),
        ({"eq": ["system:architecture", "arm64"]}, False),
        ({"eq": ["system:cpu_count", 8.0]}, True),
        ({"eq": ["system:kvm", True]}, True),
        ({"eq": ["system:kvm", 1]}, False),  # booleans are not numbers
        ({"eq": ["missing", 1]}, False),
        ({"ne": ["system:architecture", "arm64"]}, True),
        ({"ne": ["missing", "arm64"]}, False),  # a missing key makes every leaf false
        ({"ne": ["nothing", "x"]}, False),  # null is not a scalar
        ({"ne": ["sbuild:chroots", "x"]}, False),  # nor is a list
        ({"ge": ["system:cpu_count", 8]}, True),
        ({"gt": ["system:cpu_count", 8]}, False),
        ({"lt": ["system:memory", 17]}, True),
        ({"le": ["system:architecture", 1]}, False),  # strings are not compared by size
        ({"ge": ["system:kvm", 0]}, False),  # booleans are not numbers
        ({"in": ["system:architecture", ["arm64", "amd64"]]}, True),
        ({"in": ["system:architecture", []]}, False),
        ({"in": ["system:cpu_count", ["8", 8]]}, True),
        ({"contains": ["sbuild:chroots", "trixie"]}, True),
        ({"contains": ["sbuild:chroots", "sid"]}, False),
        ({"contains": ["system:architectures", 1]}, True),
        ({"contains": ["system:architectures", True]}, True),
        ({"contains": ["system:architecture", "amd64"]}, False),  # not a list
        ({"exists": "nothing"}, True),
        ({"exists": "missing"}, False),
        ({"not": {"exists": "missing"}}, True),
        ({"and": []}, True),
        ({"or": []}, False),
        (
            {
                "and": [
                    {"eq": ["system:architecture", "amd64"]},
                    {"ge": ["system:cpu_count", 4]},
                    {"or": [{"contains": ["sbuild:chroots", "sid"]}, {"exists": "sbuild:chroots"}]},
                ]
            },
            True,
        ),
    ],
)
def test_evaluate(requirement: object, expected: bool) -> None:
    tree = parse_requirement(requirement)
    assert evaluate(tree, METADATA) is expected
    assert bool(describe_failure(tree, METADATA)) is not expected


@pytest.mark.parametrize(
    ("requirement", "position", "fragment"),
    [
        ({"eqq": ["a", 1]}, "$", "did you mean 'eq'"),
        ({"eq": ["a"]}, "$.eq", "[key, value]"),
        ({"eq": ["a", [1]]}, "$.eq[1]", "not a scalar"),
        ({"eq": ["a", None]}, "$.eq[1]", "not a scalar"),
        ({"ge": ["a", "4"]}, "$.ge[1]", "compares numbers"),
        ({"ge": ["a", True]}, "$.ge[1]", "compares numbers"),
        ({"and": [{"exists": "a"}, {"exists": "bad key"}]}, "$.and[1].exists", "invalid"),
        ({"and": {"exists": "a"}}, "$.and", "array"),
        ({"in": ["a", "b"]}, "$.in[1]", "array"),
        ({"exists": "a", "eq": ["a", 1]}, "$", "exactly one operator"),
        ([], "$", "exactly one operator"),
    ],
)
def test_requirement_errors_name_the_path(
    requirement: object, position: str, fragment: str
) -> None:
    with pytest.raises(RequirementError) as caught:
        parse_requirement(requirement)
    assert position in str(caught.value)
    assert fragment in str(caught.value)
    assert caught.value.notation == "task-requirements"


def test_requirement_depth_is_bounded() -> None:
    deep: object = {"exists": "a"}
    for _ in range(40):
        deep = {"not": deep}
    with pytest.raises(RequirementError, match="nested too deeply"):
        parse_requirement(deep)


def test_canonical_form_round_trips() -> None:
    source = {"and": [{"in": ["k", ["b", 2, False]]}, {"not": {"contains": ["l", "x"]}}]}
    tree = parse_requirement(source)
    assert requirement_to_json(tree) == source
    assert parse_requirement(requirement_to_json(tree)) == tree
    assert canonical_requirement(tree) == (
        '{"and":[{"in":["k",["b",2,false]]},{"not":{"contains":["l","x"]}}]}'
    )


def test_explanations_say_what_the_worker_has() -> None:
    tree = parse_requirement({"and": [{"ge": ["system:cpu_count", 16]}, {"exists": "gpu:count"}]})
    assert describe_failure(tree, METADATA) == [
        'requirement {"ge": ["system:cpu_count", 16]} fails: system:cpu_count is 8',
        'requirement {"exists": "gpu:count"} fails: the worker has no gpu:count',
    ]
