"""A step's parameters from its InputRefs: values carried in the step, or results read from the
run's artifact store by key. Shared by a single step (engine.step_runner) and a batch call's
inputs read whole (engine.call_runner)."""

from __future__ import annotations

from typing import Any, Sequence

from barca.engine.protocol import InputRef
from barca.store.artifact_store import ArtifactStore
from barca.store.artifacts import read_result, reads_lazily


def load_input(store: ArtifactStore, ref: InputRef) -> Any:
    """A parameter's value, as its InputRef says, its results read from `store`."""
    if ref.kind == "inline":
        return ref.value
    if ref.kind == "none":
        return None
    if ref.kind == "artifact":
        return read_result(store, ref.paths[0], ref.formats[0], ref.annotation)
    return [read_result(store, p, f, _element_annotation(ref.annotation))
            for p, f in zip(ref.paths, ref.formats)]


def read_in_place(store: ArtifactStore, refs: Sequence[InputRef]) -> list[str]:
    """The keys of the parquet inputs that `load_input` reads in place, by range (a remote
    store's, not copied here: store.ranged_tables), which `fetch_whole` can fetch instead."""
    return [ref.paths[0] for ref in refs if ref.kind == "artifact"
            and ref.formats[0] == "parquet" and reads_lazily(ref.annotation)
            and store.remote_file(ref.paths[0]) is not None]


def fetch_whole(store: ArtifactStore, keys: Sequence[str]) -> None:
    """Fetch these results whole, each checked against its digest (a damaged object is the
    store's named error), so that `load_input` reads them from their local copies."""
    for key in keys:
        store.local_path(key)


def _element_annotation(annotation: str | None) -> str | None:
    """`list[pd.DataFrame]` -> `pd.DataFrame`, so collect() reads each element by its type."""
    if annotation and annotation.startswith("list[") and annotation.endswith("]"):
        return annotation[5:-1]
    return annotation
