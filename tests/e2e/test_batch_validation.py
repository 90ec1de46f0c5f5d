"""batch= usage errors on the real CLI: each is exit 2 with the JSON error envelope naming the
node and a fix, and none of the node's keys runs (issue 14; `barca docs batch`, "Choosing the
grouping" and "Overrides for one run").

Covered, each as its own case: batch= on an unpartitioned asset and on a @sensor; batch=0,
a negative number, any other string, True, a float; an empty group and a key in two groups
(written literally and given by an evaluated expression); a partition parameter annotated as
a scalar (`retailer: str`); batches(<expr>) that raises when the pipeline loads (for `get`
and `status`); batches_by(fn) whose name does not resolve, that raises on a key, or that
returns a label that is not a str or an int (float, list, bool, None); the same for keys
derived from a sensor, checked once the sensor has run; `--batch NODE=V` naming a node
without batch=, and bad `--batch` values. The strict=True miss is in test_batch_grouping.py.

Every batch function appends to calls.log, so "none of its keys ran" is checked on disk.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conftest import barca, write

HEAD = """
    import json
    from pathlib import Path
    from barca import asset, batches, batches_by, partitions, partitions_from, sensor

    def _call(node, keys):
        with open("calls.log", "a") as fh:
            fh.write(json.dumps([node, keys]) + "\\n")
"""


def pipeline(body: str) -> str:
    return textwrap.dedent(HEAD) + textwrap.dedent(body)


def batched(batch: str, param: str = "k: list[str]", keys: str = '["a", "b"]') -> str:
    """One partitioned asset `scored` with the given batch= text and partition parameter."""
    name = param.split(":")[0]
    return f"""
        @asset(partitions={{"{name}": partitions({keys})}}, batch={batch})
        def scored({param}) -> dict:
            _call("scored", {name})
            return {{key: 1 for key in {name}}}
    """


def usage_error(root: Path, *args: str) -> dict:
    """Run `get ARGS`; it must be exit 2 with a usage envelope; returns the envelope."""
    got = barca(root, "get", *args).expect(2)
    err = got.envelope
    assert err["kind"] == "usage" and err["code"] == 2, err
    assert err["remediation"], err
    assert not (root / "calls.log").exists(), "a batch function ran despite the usage error"
    return err


CASES = {
    # name: (pipeline body, words in the error, words in the fix)
    "unpartitioned": ("""
        @asset(batch=2)
        def scored() -> int:
            return 1
    """, ["pipeline.py:scored", "no partitions"], ["partitions="]),
    "sensor": ("""
        @sensor(batch=2)
        def scored() -> dict:
            return {"a": 1}
    """, ["pipeline.py:scored", "batch"], ["Remove batch="]),
    "zero": (batched("0"), ["pipeline.py:scored", "positive integer", "`0`"], ["batch=20"]),
    "negative": (batched("-3"), ["pipeline.py:scored", "positive integer", "-3"], ["batch=20"]),
    "other string": (batched('"some"'), ["pipeline.py:scored", "some"], ['batch="all"']),
    "bool": (batched("True"), ["pipeline.py:scored", "True"], ["batch=20"]),
    "float": (batched("2.5"), ["pipeline.py:scored", "2.5"], ["batch=20"]),
    "empty group": (batched('batches([["a"], []])'), ["pipeline.py:scored", "non-empty"],
                    ["batches("]),
    "key in two groups": (batched('batches([["a", "b"], ["b"]])'),
                          ["pipeline.py:scored", "'b'", "two groups"], ["one group"]),
    "scalar partition parameter": (batched('"all"', param="retailer: str"),
                                   ["pipeline.py:scored", "retailer: str"],
                                   ["retailer: list[str]", "remove batch="]),
    "int partition parameter": (batched("2", param="n: int", keys="[1, 2]"),
                                ["pipeline.py:scored", "n: int"], ["n: list[int]"]),
    "batches expression raises": ("""
        def make_groups():
            raise RuntimeError("no groups today")
    """ + batched("batches(make_groups())"),
        ["pipeline.py:scored", "make_groups()", "RuntimeError: no groups today"],
        ["list of lists"]),
    "batches expression gives a key twice": ("""
        def make_groups():
            return [["a"], ["a", "b"]]
    """ + batched("batches(make_groups())"),
        ["pipeline.py:scored", "'a'", "two groups"], ["one group"]),
    "batches expression gives an empty group": ("""
        GROUPS = [["a", "b"], []]
    """ + batched("batches(GROUPS)"), ["pipeline.py:scored"], ["batches("]),
    "batches_by name does not resolve": (batched("batches_by(nowhere)"),
                                         ["pipeline.py:scored", "nowhere"], ["label"]),
    "batches_by raises on a key": ("""
        def label(key):
            if key == "b":
                raise KeyError("no label for " + key)
            return "x"
    """ + batched("batches_by(label)"),
        ["pipeline.py:scored", "k=b", "no label for b"], ["str or an int"]),
    "batches_by float label": ("""
        def label(key):
            return 1.5 if key == "b" else "x"
    """ + batched("batches_by(label)"),
        ["pipeline.py:scored", "k=b", "1.5", "str or an int"], ["str or an int"]),
    "batches_by list label": ("""
        def label(key):
            return ["x"] if key == "b" else "x"
    """ + batched("batches_by(label)"), ["pipeline.py:scored", "k=b", "list"], ["label"]),
    "batches_by bool label": ("""
        def label(key):
            return True
    """ + batched("batches_by(label)"), ["pipeline.py:scored", "bool"], ["label"]),
    "batches_by None label": ("""
        def label(key):
            return None
    """ + batched("batches_by(label)"), ["pipeline.py:scored", "None"], ["label"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_batch_is_exit_2_naming_the_node_and_the_fix(project: Path, case: str) -> None:
    body, in_error, in_fix = CASES[case]
    write(project, {"pipeline.py": pipeline(body)})
    err = usage_error(project, "scored", "pipeline.py")
    for word in in_error:
        assert word in err["error"], (word, err)
    for word in in_fix:
        assert word.lower() in err["remediation"].lower(), (word, err)


def test_batches_expression_that_raises_is_a_load_error_for_status_too(project: Path) -> None:
    write(project, {"pipeline.py": pipeline(CASES["batches expression raises"][0])})
    got = barca(project, "status", "--json", "pipeline.py").expect(2)
    assert "pipeline.py:scored" in got.envelope["error"]
    assert "no groups today" in got.envelope["error"]


def test_labels_of_keys_from_a_sensor_are_checked_once_the_sensor_ran(project: Path) -> None:
    write(project, {"versions.json": json.dumps({"a": 1, "b": 2, "bad": 3}),
                    "pipeline.py": pipeline("""
        @sensor()
        def versions() -> dict:
            return json.loads(Path("versions.json").read_text())

        def label(key):
            if key == "bad":
                raise ValueError("cannot label " + key)
            return key[0]

        @asset(partitions={"k": partitions_from(versions)}, batch=batches_by(label))
        def scored(k: list[str], versions: dict) -> dict:
            _call("scored", k)
            return {key: versions[key] for key in k}
    """)})
    err = usage_error(project, "scored", "pipeline.py")
    assert "pipeline.py:scored" in err["error"] and "k=bad" in err["error"]
    assert "cannot label bad" in err["error"]

    # the same pipeline is fine once the source no longer gives that key
    (project / "versions.json").write_text(json.dumps({"a": 1, "b": 2}))
    ok = barca(project, "get", "scored", "pipeline.py").expect(0)
    assert ok.json["final_output"] == {"k=a": 1, "k=b": 2}


UNBATCHED = pipeline("""
    @asset(partitions={"k": partitions(["a", "b"])})
    def plain(k: str) -> str:
        _call("plain", [k])
        return k

    @asset(partitions={"k": partitions_from(plain)}, batch=2)
    def scored(k: list[str], plain: dict) -> dict:
        _call("scored", k)
        return {key: plain[key] for key in k}
""")


@pytest.mark.parametrize("override", ["plain=all", "plain=none", "plain=2"])
def test_batch_override_naming_a_node_without_batch_is_exit_2(project: Path,
                                                              override: str) -> None:
    write(project, {"pipeline.py": UNBATCHED})
    err = usage_error(project, "scored", "pipeline.py", "--batch", override)
    assert "pipeline.py:plain" in err["error"] and "batch=" in err["error"]
    assert "plain" in err["remediation"]


SENSOR_SOURCE = pipeline("""
    @sensor()
    def versions() -> dict:
        return {"a": 1, "b": 2}

    @asset(partitions={"k": partitions_from(versions)}, batch=2)
    def scored(k: list[str], versions: dict) -> dict:
        _call("scored", k)
        return {key: versions[key] for key in k}
""")


def test_batch_override_naming_a_node_without_partitions_does_not_advise_batch(
        project: Path) -> None:
    """A sensor has no keys to group: the fix is to drop it from --batch, never to declare
    batch= on it (which is a parse error of its own)."""
    write(project, {"pipeline.py": SENSOR_SOURCE})
    err = usage_error(project, "scored", "pipeline.py", "--batch", "versions=2")
    assert "pipeline.py:versions has no partitions" in err["error"], err
    assert "Declare batch=" not in err["remediation"], err
    assert err["remediation"].startswith("Drop versions from --batch"), err


@pytest.mark.parametrize("value", ["0", "-1", "some", "scored=0", "scored=some", "scored="])
def test_a_bad_batch_override_value_is_exit_2(project: Path, value: str) -> None:
    write(project, {"pipeline.py": UNBATCHED})
    err = usage_error(project, "scored", "pipeline.py", "--batch", value)
    assert "--batch" in err["error"] or "--batch" in err["remediation"], err


def test_the_override_applies_to_nodes_with_batch_only(project: Path) -> None:
    """The positive control for the cases above: `--batch all` regroups `scored` only."""
    write(project, {"pipeline.py": UNBATCHED})
    got = barca(project, "get", "scored", "pipeline.py", "--batch", "all").expect(0)
    calls = sorted(json.loads(line) for line in (project / "calls.log").read_text().splitlines())
    assert calls == [["plain", ["a"]], ["plain", ["b"]], ["scored", ["a", "b"]]]
    assert got.json["final_output"] == {"k=a": "a", "k=b": "b"}
