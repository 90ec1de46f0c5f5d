"""What `barca queue` shows: the runs in flight and the runs waiting, and whether the queue is
paused. The same JSON keys as `GET /queue` of `barca serve` (`paused, paused_at, draining,
max_runs, running, queued, capacity`), read from the project's database when no server is
asked (`engine.serving.look_at_queue`: every server's and command's runs, the queue a server
keeps durable); the text is drawn from that JSON, so a server's answer prints the same way.
"""

from __future__ import annotations

from typing import Any

from barca.engine.serving import QueueLook
from barca.views.times import iso_time, utc_time_of


def queue_json(look: QueueLook) -> dict[str, Any]:
    """The look as JSON. `max_runs` and `capacity` are a server's (null here), `served` says
    whether a `barca serve` holds the project, a queued run's `held` whether the server that
    accepted it still runs (else the next one starts it)."""
    return {"paused": look.paused_at is not None, "paused_at": iso_time(look.paused_at),
            "draining": False, "max_runs": None, "served": look.served,
            "running": [{"run_id": r.run_id, "command": r.command, "targets": list(r.targets),
                         "triggered_by": r.triggered_by, "started_at": iso_time(r.started_at),
                         "pid": r.pid} for r in look.running],
            "queued": [{"run_id": w.run_id, "command": w.command, "targets": list(w.targets),
                        "triggered_by": w.triggered_by, "accepted_at": iso_time(w.accepted_at),
                        "position": i, "held": w.held}
                       for i, w in enumerate(look.waiting, 1)],
            "capacity": None}


def queue_text(body: dict[str, Any]) -> str:
    """A queue's JSON (this project's, or a server's answer) for a person."""
    if body["paused"]:
        head = f"The queue is paused since {_when(body['paused_at'])} UTC: no queued run " \
               "starts until `barca queue resume`."
    else:
        head = "The queue is running."
    if body.get("draining"):
        head += " The server is shutting down."
    lines = [head]
    if body.get("served"):
        lines.append("A `barca serve` runs on this project: pause or resume its queue with "
                     "--server URL (or BARCA_SERVER).")
    if not body["running"] and not body["queued"]:
        lines.append("Nothing is running or queued.")
    if body["running"]:
        lines.append(f"Running ({len(body['running'])}):")
        lines += [f"  {_run(r)}  since {_when(r.get('started_at') or r.get('accepted_at'))}"
                  for r in body["running"]]
    if body["queued"]:
        lines.append(f"Queued ({len(body['queued'])}):")
        lines += [f"  {q['position']}. {_run(q)}  accepted {_when(q['accepted_at'])}"
                  + ("" if q.get("held", True) else
                     "  (its server is gone: the next `barca serve` starts it)")
                  for q in body["queued"]]
    return "\n".join(lines)


def _run(run: dict[str, Any]) -> str:
    targets = ",".join(run["targets"]) or "(every node)"
    return f"{run['run_id']}  {run['command']} {targets}  by {run['triggered_by'] or '?'}"



def _when(moment: str | None) -> str:
    return utc_time_of(moment) or "?"
