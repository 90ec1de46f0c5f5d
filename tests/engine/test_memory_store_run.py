"""A whole keyed run through the driver on the `memory://` artifact store (store.memory_store):
the seam holds when nothing of the result lives on the local disk. Real SQLite, the real step
runner in this process (the only executor that can reach a memory store), a keyed source, a
batch call that returns a table split per key, a downstream node collecting every key; then a
re-run from cache, a one-key change, and a result gone from the store."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from barca.engine import driver
from barca.engine.inprocess import InProcessExecutor
from barca.store.memory_store import MemoryStore

pd = pytest.importorskip("pandas")

PIPELINE = '''
import json
import pathlib
import pandas as pd
from barca import asset, collect, partitions_from, sensor

@sensor()
def versions() -> dict:
    return json.loads((pathlib.Path(__file__).parent / "versions.json").read_text())

@asset(partitions={"retailer": partitions_from(versions)})
def cleaned(retailer: str, versions: str) -> str:
    return f"{retailer}@{versions}"

@asset(partitions={"retailer": partitions_from(versions)}, inputs={"cleaned": cleaned},
       batch="all")
def scored(retailer: list, cleaned: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"retailer": retailer,
                         "label": [cleaned[r] for r in retailer],
                         "n": [len(cleaned[r]) for r in retailer]})

@asset(inputs={"tables": collect(scored)})
def summary(tables: list[pd.DataFrame]) -> dict:
    return {"rows": sum(len(t) for t in tables),
            "labels": sorted(label for t in tables for label in t["label"])}
'''


class CountingStore(MemoryStore):
    """A memory store that counts what planning asks of it."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[str] = []

    def names(self, node_dir: str) -> frozenset[str]:
        self.listed.append(node_dir)
        return super().names(node_dir)


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "barca.toml").write_text("")
    (root / "p.py").write_text(textwrap.dedent(PIPELINE))
    (root / "versions.json").write_text(json.dumps({"r1": "v1", "r2": "v1", "r3": "v1"}))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return root


@pytest.fixture
def store():
    made = CountingStore()
    yield made
    made.destroy()


def get(root: Path, store: MemoryStore, target: str):
    executors: list[InProcessExecutor] = []

    def new_executor() -> InProcessExecutor:
        executors.append(InProcessExecutor(root))
        return executors[-1]

    result = driver.run("get", target, ["p.py"], cwd=root, new_executor=new_executor,
                        store=store)
    return result, executors


def test_a_keyed_run_lives_in_the_memory_store_and_reruns_from_it(project, store):
    result, _ = get(project, store, "summary")
    assert result.status == "success"
    assert result.values("p.py:summary") == {
        "rows": 3, "labels": ["r1@v1", "r2@v1", "r3@v1"]}
    scored = result.values("p.py:scored")
    assert {k: v.to_dict("records") for k, v in scored.items()} == {
        f"retailer={r}": [{"retailer": r, "label": f"{r}@v1", "n": 5}]
        for r in ("r1", "r2", "r3")}
    assert len(store.names("p.py--cleaned")) == 3 and len(store.names("p.py--scored")) == 3
    local = project / ".barca" / "artifacts"  # made with the project's state, and left empty
    assert [p for p in local.rglob("*") if p.is_file()] == []

    again, _ = get(project, store, "summary")
    assert again.status == "success" and again.executed == 1  # only the sensor observes
    assert again.values("p.py:summary") == result.values("p.py:summary")

    (project / "versions.json").write_text(json.dumps({"r1": "v1", "r2": "v2", "r3": "v1"}))
    changed, _ = get(project, store, "summary")
    ran = {o for o in changed.results}
    assert ran == {"p.py:versions", "p.py:cleaned", "p.py:scored", "p.py:summary"}
    assert list(changed.results["p.py:cleaned"]) == ['r2']
    assert changed.values("p.py:summary")["labels"] == ["r1@v1", "r2@v2", "r3@v1"]


@pytest.mark.parametrize("keys", [3, 40])
def test_a_result_gone_from_the_store_is_computed_again_found_by_one_listing(project, store,
                                                                            keys):
    """Planning checks the cached results a run reads with one listing of each node's
    directory per check, however many keys: the same listings at 3 keys as at 40."""
    retailers = [f"r{i}" for i in range(1, keys + 1)]
    (project / "versions.json").write_text(json.dumps(dict.fromkeys(retailers, "v1")))
    first, _ = get(project, store, "summary")
    gone = first.key_of("p.py:scored", "r3")[0]
    store.delete([gone])
    store.listed.clear()
    # r2 changes: `summary` reruns and collects the other keys of `scored` from the store
    (project / "versions.json").write_text(json.dumps({**dict.fromkeys(retailers, "v1"),
                                                       "r2": "v2"}))
    result, _ = get(project, store, "summary")
    assert result.status == "success"
    assert sorted(result.results["p.py:scored"]) == ["r2", "r3"]
    plan = result.plans["p.py:scored"]
    assert {plan.keys[i]: plan.reasons[i].code for i in plan.run} == {
        "r2": "changed", "r3": "artifact_missing"}
    assert store.get(gone)  # written again
    assert result.values("p.py:summary")["rows"] == keys
    # summary's inputs (finds r3 gone), scored's reopened key's input, summary's again
    assert store.listed == ["p.py--scored", "p.py--cleaned", "p.py--scored"]


def test_a_dry_run_on_the_memory_store_observes_in_a_scratch_store(project, store):
    """A dry run's sensors write to a scratch store of the same kind, destroyed after: the
    plan names the changed key, and the run's store is left as it was."""
    get(project, store, "summary")
    before = {node: store.names(node) for node in
              ("p.py--versions", "p.py--cleaned", "p.py--scored", "p.py--summary")}
    (project / "versions.json").write_text(json.dumps({"r1": "v1", "r2": "v2", "r3": "v1"}))
    result = driver.run("get", "summary", ["p.py"], cwd=project, dry_run=True,
                        new_executor=lambda: InProcessExecutor(project), store=store)
    assert result.status == "dry_run"
    plan = result.plans["p.py:cleaned"]
    assert [plan.keys[i] for i in plan.run] == ["r2"]
    assert {node: store.names(node) for node in before} == before
    assert list(MemoryStore._opened) == [store.address]  # the scratch store is gone
