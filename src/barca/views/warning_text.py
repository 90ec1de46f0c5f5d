"""The words of the engine's warnings and run notes. The engine says what it saw as a code with
its evidence (`{"kind": "unused_input", "node": ..., "param": ...}`, see engine.run_checks) or
as a note (engine.events: `BatchNote`, `MetadataNote`); a warning reaches a user only through
here, as the `[barca] warning:` line of a run's events and as the `{kind, node, param,
message}` of a JSON body's `warnings`; a note as the `[barca] ...` line of a run's events and
in the run's logs; the marks of what a run's logs do not keep (engine.log_cap) in them."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from barca.engine.events import BatchNote, RunNote, UpgradeNote
from barca.engine.log_cap import LineCut, LogLimit, LogMark

Evidence = Mapping[str, Any]


def _unused_input(w: Evidence) -> str:
    return (f"{w['node']} never uses its input `{w['param']}`; it is still computed and loaded "
            f"for every step (name it `_{w['param']}` to only wait for it, or remove it)")


def _over_capacity(w: Evidence) -> str:
    return (f"'{w['name']}' has weight={w['weight']}, more than the capacity {w['units']} "
            f"({w['source']}); it runs alone")


def _serializer_fallback(w: Evidence) -> str:
    which = f"{w['keys']} of {w['of']} keys ({w['first']}, ...) " \
        if w["first"] is not None else ""
    return (f"{w['node']}: serializer=\"{w['serializer']}\" needs a table (pandas, polars, "
            f"Arrow or DuckDB), but {which}returned another value; stored as pickle instead")


def _bytes_changed(w: Evidence) -> str:
    which = ""
    if w["keys"] is not None:
        more = f", +{w['count'] - 5} more" if w["count"] > 5 else ""
        which = f" (keys {', '.join(w['keys'])}{more})"
    return (f"{w['node']} produced different bytes for the same code and inputs{which}; the "
            "function is not deterministic (declare deterministic=False if that is expected)")


def _missing_result(w: Evidence) -> str:
    return (f"{w['node']}: cached result of {w['key'] or 'the node'} is missing "
            f"({w['location']}); computing it again")


def _undeclared_env(w: Evidence) -> str:
    return (f"{w['node']} reads environment variable {w['param']}, which its env= does not "
            "declare; its value is not part of the run hash, so a change of it reruns nothing "
            f"(add env=[\"{w['param']}\"] if the result depends on it)")


def _undeclared_env_summary(w: Evidence) -> str:
    names = w["names"]
    more = f" (+{len(names) - 5} more)" if len(names) > 5 else ""
    steps = f"{w['steps']} steps read" if w["steps"] != 1 else "1 step reads"
    return (f"{steps} environment variables not declared in env=: {', '.join(names[:5])}"
            f"{more}; barca status lists them")


def _telemetry(w: Evidence) -> str:
    what = {"unknown": "is not an integration barca knows",
            "missing": "needs a library that is not installed",
            "undelivered": f"did not receive run {w.get('run_id')}"}[w["problem"]]
    return f"telemetry '{w['integration']}' {what}; {w['fix']}"


TEXTS: dict[str, Callable[[Evidence], str]] = {
    "telemetry": _telemetry,
    "unused_input": _unused_input, "over_capacity": _over_capacity,
    "undeclared_env": _undeclared_env, "undeclared_env_summary": _undeclared_env_summary,
    "serializer_fallback": _serializer_fallback, "bytes_changed": _bytes_changed,
    "missing_result": _missing_result}


def warning_text(kind: str, evidence: Evidence) -> str:
    return TEXTS[kind](evidence)


def warning_json(warning: Evidence) -> dict[str, Any]:
    """A warning as JSON bodies carry it."""
    return {"kind": warning["kind"], "node": warning["node"], "param": warning["param"],
            "message": warning_text(warning["kind"], warning)}


def warning_lines(warnings: list[dict[str, Any]]) -> list[str]:
    """The stderr lines of a JSON body's `warnings`: one each, but one for every
    undeclared_env item together (as a run says them)."""
    lines = [f"[barca] warning: {w['message']}" for w in warnings
             if w["kind"] != "undeclared_env"]
    undeclared = [w for w in warnings if w["kind"] == "undeclared_env"]
    if undeclared:
        lines.append("[barca] warning: " + _undeclared_env_summary({
            "steps": len({w["node"] for w in undeclared}),
            "names": sorted({w["param"] for w in undeclared})}))
    return lines


def note_text(note: RunNote) -> str:
    """`batch:<node> 7 calls, 3077 keys | import 0.1s, load ...` for a batched node's calls;
    `code hash upgraded: ...` once after an upgrade of the code hash;
    `metadata 0.3s recording this run's results` for the coordinator's own time."""
    if isinstance(note, BatchNote):
        parts = ", ".join(f"{part} {seconds:.1f}s" for part, seconds in note.seconds)
        calls = f"{note.calls} call{'s' if note.calls != 1 else ''}"
        keys = f"{note.keys} key{'s' if note.keys != 1 else ''}"
        return f"batch:{note.node_id} {calls}, {keys} | {parts}"
    if isinstance(note, UpgradeNote):
        keys = f"{note.keys} key{'s' if note.keys != 1 else ''}"
        nodes = f"{note.nodes} node{'s' if note.nodes != 1 else ''}"
        return (f"code hash upgraded: {keys} of {nodes} computed by an earlier barca kept as "
                "cached, none rerun (comments and layout no longer count as code; see "
                "`barca docs cache`)")
    return f"metadata {note.seconds:.1f}s recording this run's results"


def log_mark_text(mark: LogMark) -> str:
    """The line a run's logs keep where a step's output was cut (engine.log_cap)."""
    if isinstance(mark, LineCut):
        return (f"{mark.text} [barca] line cut: {mark.cut:,} more characters not kept (a "
                f"stored line keeps {mark.kept:,})")
    if isinstance(mark, LogLimit):
        return (f"[barca] log limit: this step printed more than {mark.max_lines:,} lines; "
                "the later ones are not kept")
    return (f"[barca] log limit: {mark.lines:,} more lines ({mark.chars:,} characters) of "
            "this step's output were not kept")


def sink_failed_text(message: str) -> str:
    """The line a step's logs keep when one of its @sink copies could not be written."""
    return f"[barca] SINK FAILED: {message}"
