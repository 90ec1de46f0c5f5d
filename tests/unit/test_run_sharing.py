"""Which jobs due at the same instant share a run (the reference's rules for `serve`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from barca.server.sharing import depths, share

# base ─┬─ left ── deep
#       ├─ right
#       └─ wide ◀─ other
UPSTREAM = {"base": (), "other": (), "left": ("base",), "right": ("base",),
            "wide": ("base", "other"), "deep": ("left",), "alone": ()}
ORDER = ("alone", "base", "other", "left", "right", "wide", "deep")
DEPTH = depths(ORDER, UPSTREAM)


@dataclass
class FakeJob:
    id: str
    cone: Mapping[str, int]


def job(node: str) -> FakeJob:
    cone, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n not in cone:
            cone.add(n)
            stack.extend(UPSTREAM[n])
    return FakeJob(node, {n: DEPTH[n] for n in cone})


def grouped(*nodes: str) -> tuple[list[list[str]], dict[str, tuple[str, str]]]:
    groups, kept_out = share([job(n) for n in nodes])
    return [[j.id for j in g] for g in groups], kept_out


def test_depth_is_one_more_than_the_deepest_input() -> None:
    assert DEPTH == {"alone": 0, "base": 0, "other": 0, "left": 1, "right": 1, "wide": 1,
                     "deep": 2}


def test_side_by_side_readers_of_one_upstream_share() -> None:
    assert grouped("left", "right") == ([["left", "right"]], {})


def test_a_job_and_its_scheduled_reader_share() -> None:
    assert grouped("left", "deep") == ([["left", "deep"]], {})
    assert grouped("base", "left", "right") == ([["base", "left", "right"]], {})


def test_jobs_with_nothing_in_common_run_apart_without_a_word() -> None:
    assert grouped("alone", "left") == ([["alone"], ["left"]], {})


def test_jobs_at_different_depths_below_the_common_step_run_apart() -> None:
    # deep would wait behind right (depth 1), which it does not read
    assert grouped("right", "deep") == ([["right"], ["deep"]], {"deep": ("deep", "right")})


def test_a_job_that_also_reads_something_the_others_do_not_runs_apart() -> None:
    # together, left would wait for other (wide's second input)
    assert grouped("left", "wide") == ([["left"], ["wide"]], {"wide": ("left", "other")})
