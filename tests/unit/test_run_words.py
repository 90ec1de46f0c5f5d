"""The engine and the planner say what happened as data (engine.events' notes, engine.log_cap's
marks, planner.batching's BatchPlan); the words are the renderers' (views.warning_text,
views.plan_text), on literal data. The lines are those the CLI prints on stderr, the server's
run events carry and `barca logs` shows (tests/e2e/test_batch_results.py,
test_batch_seed_example.py and test_security_load.py check them end to end)."""

from __future__ import annotations

from barca.engine.events import BatchNote, MetadataNote
from barca.engine.log_cap import LineCut, LogCap, LogDropped, LogLimit
from barca.engine.protocol import CallFinished
from barca.engine.result import BatchExecution
from barca.planner.batching import ALL, BatchPlan, labels_setting, size_setting
from barca.views.plan_text import calls_summary
from barca.views.run_events import RunEvents
from barca.views.warning_text import log_mark_text, note_text, sink_failed_text

SECONDS = (("import", 0.04), ("load", 1.25), ("compute", 12.0), ("split", 0.0),
           ("write", 0.333))


def test_a_batch_note_says_calls_keys_and_where_the_time_went():
    assert note_text(BatchNote("pipeline.py:scored", 7, 3077, SECONDS)) == (
        "batch:pipeline.py:scored 7 calls, 3077 keys | import 0.0s, load 1.2s, "
        "compute 12.0s, split 0.0s, write 0.3s")
    one = note_text(BatchNote("p.py:a", 1, 1, SECONDS))
    assert one.startswith("batch:p.py:a 1 call, 1 key | import")


def test_the_metadata_note_says_the_coordinators_own_time():
    assert note_text(MetadataNote(0.06)) == "metadata 0.1s recording this run's results"


def test_a_batched_nodes_sums_become_its_note():
    sums = BatchExecution()
    for keys in (2, 1):
        sums.add(CallFinished(step_id="p.py:a[b1]", node_id="p.py:a", batch="b1", keys=keys,
                              written=keys, attempts=1, elapsed_seconds=2.0, max_rss_bytes=0,
                              import_seconds=0.1, load_seconds=0.2, compute_seconds=1.0,
                              split_seconds=0.05, write_seconds=0.3))
    assert note_text(sums.note("p.py:a")) == (
        "batch:p.py:a 2 calls, 3 keys | import 0.2s, load 0.4s, compute 2.0s, split 0.1s, "
        "write 0.6s")


def test_the_run_events_carry_the_notes_words():
    events: list[dict] = []
    reporter = RunEvents()
    reporter.emit = events.append
    reporter.run_note(MetadataNote(1.0))
    assert events == [{"type": "note", "text": "metadata 1.0s recording this run's results",
                       "line": "[barca] metadata 1.0s recording this run's results"}]


def test_a_dry_runs_batch_calls_in_words():
    assert calls_summary(BatchPlan(ALL, 3, 1)) == "3 keys in 1 call (batch=all)"
    assert calls_summary(BatchPlan(size_setting(2), 3, 2)) == "3 keys in 2 calls (batch=2)"
    assert calls_summary(BatchPlan(ALL, 1, 1)) == "1 key in 1 call (batch=all)"
    assert calls_summary(BatchPlan(labels_setting(), 25, None)) == "25 keys (batches_by)"


def test_the_log_cap_says_what_it_cut_as_data_and_the_renderer_in_words():
    cap = LogCap(max_lines=2, max_chars=5)
    assert cap.admit("s", "short") == "short"
    assert cap.admit("s", "a longer line") == LineCut("a lon", 8, 5)
    assert cap.admit("s", "third") == LogLimit(2)
    assert cap.admit("s", "fourth") is None
    assert cap.summaries() == [("s", LogDropped(2, 11))]
    assert log_mark_text(LineCut("a lon", 8, 5)) == \
        "a lon [barca] line cut: 8 more characters not kept (a stored line keeps 5)"
    assert log_mark_text(LogLimit(10_000)) == \
        "[barca] log limit: this step printed more than 10,000 lines; the later ones are not kept"
    assert log_mark_text(LogDropped(1_502, 20_480)) == ("[barca] log limit: 1,502 more lines "
                                                       "(20,480 characters) of this step's "
                                                       "output were not kept")


def test_a_failed_sink_copy_in_words():
    assert sink_failed_text("exports/x.parquet: SerializeError: no table") == \
        "[barca] SINK FAILED: exports/x.parquet: SerializeError: no table"
