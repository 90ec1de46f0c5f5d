"""/assets/{name}/partitions: a partitioned node's keys in pages, filtered by status or a
substring, with the failures grouped by their error's first line."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, write

PIPELINE = """
    from barca import asset, partitions

    @asset(partitions={"k": partitions([str(i) for i in range(2000)])})
    def wide(k: str) -> int:
        n = int(k)
        if n % 7 == 0:
            raise ValueError("bad seven")
        if n % 11 == 0:
            raise KeyError("bad eleven")
        return n

    @asset()
    def plain() -> int:
        return 1
"""

KEYS = [str(i) for i in range(2000)]
SEVENS = {k for k in KEYS if int(k) % 7 == 0}
ELEVENS = {k for k in KEYS if int(k) % 11 == 0 and int(k) % 7 != 0}
FAILED = SEVENS | ELEVENS


def labels(keys) -> set[str]:
    """Keys as every answer writes them: their labels."""
    return {f"k={k}" for k in keys}


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("parts")
    (root / "barca.toml").write_text("")
    write(root, {"p.py": PIPELINE})
    barca(root, "get", "wide", "p.py", timeout=120).expect(1)
    barca(root, "get", "plain", "p.py").expect(0)
    return root


@pytest.fixture
def server(ran: Path, serve):
    return serve(ran, "p.py")


def _page(server, **params) -> dict:
    got = server.get("/assets/wide/partitions", params=params)
    assert got.status_code == 200, got.text
    return got.json()


def test_counts_and_failed_pages_cover_exactly_the_failed_keys(server) -> None:
    first = _page(server)
    assert first["node_id"] == "p.py:wide"
    assert first["total"] == 2000
    assert first["failed"] == len(FAILED) == 442
    assert len(first["keys"]) == 100 and first["next_offset"] == 100

    seen, offset, pages = [], 0, 0
    while offset is not None:
        page = _page(server, status="failed", limit="100", offset=str(offset))
        assert page["matched"] == len(FAILED)
        assert len(page["keys"]) <= 100
        assert all(k["status"] == "failed" for k in page["keys"])
        seen += [k["key"] for k in page["keys"]]
        offset, pages = page["next_offset"], pages + 1
        assert pages <= 10
    assert len(seen) == len(set(seen)), "a key on two pages"
    assert set(seen) == labels(FAILED)
    assert pages == 5

    done = _page(server, status="success", limit="500")
    assert done["matched"] == 2000 - len(FAILED)
    assert all(k["status"] == "success" for k in done["keys"])


def test_a_substring_filter_matches_only_keys_containing_it(server) -> None:
    page = _page(server, q="123", limit="500")
    expected = {k for k in KEYS if "123" in k}
    assert {k["key"] for k in page["keys"]} == labels(expected)
    assert page["matched"] == len(expected) and page["next_offset"] is None
    both = _page(server, q="123", status="failed", limit="500")
    assert {k["key"] for k in both["keys"]} == labels(expected & FAILED)


def test_a_filter_holding_a_label_matches_the_keys_labels(server) -> None:
    """A key's label (what the page and its failure groups show) finds that key; a part of
    one finds the keys whose label holds it: `k=123` the keys that start with 123."""
    page = _page(server, q="k=123", limit="500")
    assert {k["key"] for k in page["keys"]} == labels(k for k in KEYS if k.startswith("123"))
    assert page["matched"] == 11
    sample = _page(server)["failure_groups"][0]["sample_keys"][0]
    assert [k["key"] for k in _page(server, q=sample, status="failed")["keys"]] == [sample]


def test_failures_are_grouped_by_their_errors_first_line(server) -> None:
    groups = _page(server)["failures"]
    assert [g["count"] for g in groups] == [len(SEVENS), len(ELEVENS)], groups
    sevens, elevens = groups
    assert "bad seven" in sevens["error"] and sevens["error_type"] == "ValueError"
    assert "bad eleven" in elevens["error"] and elevens["error_type"] == "KeyError"
    for group, keys in ((sevens, SEVENS), (elevens, ELEVENS)):
        assert 1 <= len(group["sample_keys"]) <= 5
        assert set(group["sample_keys"]) <= labels(keys)
        assert len(set(group["sample_keys"])) == len(group["sample_keys"])
        # one group's keys, paged like any filter
        page = _page(server, error=group["error"], limit="500")
        assert {k["key"] for k in page["keys"]} == labels(keys)
        assert page["matched"] == len(keys)
    assert _page(server, error="no such error")["keys"] == []


def test_runs_page_by_offset_newest_first(server) -> None:
    first = server.get("/runs", params={"limit": "1"}).json()
    second = server.get("/runs", params={"limit": "1", "offset": "1"}).json()
    assert first["total"] == second["total"] == 2, (first, second)
    assert first["truncated"] and not second["truncated"]
    assert [first["runs"][0]["target"], second["runs"][0]["target"]] == ["plain", "wide"]
    assert server.get("/runs", params={"offset": "2"}).json()["runs"] == []


def test_limits_are_bounded_and_a_plain_node_is_a_400(server) -> None:
    big = _page(server, limit="500")
    assert len(big["keys"]) == 500 and big["next_offset"] == 500
    over = server.get("/assets/wide/partitions", params={"limit": "100000"})
    assert over.status_code == 400 and "1..500" in over.json()["error"]
    assert server.get("/assets/wide/partitions", params={"limit": "x"}).status_code == 400
    assert server.get("/assets/wide/partitions",
                      params={"status": "maybe"}).status_code == 400
    plain = server.get("/assets/plain/partitions")
    assert plain.status_code == 400, plain.text
    assert "not partitioned" in plain.json()["error"]
    assert server.get("/assets/nope/partitions").status_code == 404
