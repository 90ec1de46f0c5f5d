"""The server answers as its OpenAPI document says, for generated requests on every route:
schemathesis draws requests from `/openapi.json`'s schemas and checks status codes, content
types and bodies against it, on a writable server and on a read-only one."""

from __future__ import annotations

import pytest

pytest.importorskip("schemathesis")
import schemathesis  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from barca import __version__  # noqa: E402
from barca.server.openapi import document  # noqa: E402
from conftest import ServeProcess, barca, write  # noqa: E402

PIPELINE = """
    from barca import Schedule, asset, partitions, task

    @asset(partitions={"k": partitions(["a", "b", "c"])})
    def keyed(k: str) -> int:
        if k == "c":
            raise ValueError("c is bad")
        return len(k)

    @asset(freshness=Schedule("0 0 1 1 *"))
    def plain() -> int:
        print("plain ran")
        return 1

    @task(inputs={"plain": plain})
    def publish(plain: int) -> None:
        print("published", plain)
"""

schema = schemathesis.openapi.from_dict(document(__version__))
SEEN: dict[str, set[tuple[str, str]]] = {"writable": set(), "read_only": set()}


@pytest.fixture(scope="module", params=["writable", "read_only"])
def server(request, tmp_path_factory):
    root = write(tmp_path_factory.mktemp("api"), {"barca.toml": "", "p.py": PIPELINE})
    barca(root, "get", "plain", "p.py").expect(0)
    barca(root, "get", "keyed", "p.py").expect(1)  # a failed key, for the partition pages
    server = ServeProcess(root, ("p.py", *(["--read-only"] if request.param == "read_only"
                                          else [])))
    server.mode = request.param
    yield server
    server.stop()


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_route_answers_as_documented(case, server):
    # a request can fit the schema and still be refused as the CLI refuses it (--no-cascade
    # without --refresh, a task given to get): a 400 there is the contract, not a failure
    excluded = [schemathesis.checks.positive_data_acceptance] if case.method == "POST" else []
    case.call_and_validate(base_url=server.url, timeout=60, excluded_checks=excluded)
    SEEN[server.mode].add((case.method.upper(), case.path))


def test_every_documented_operation_was_exercised_on_both_servers():
    operations = {(method.upper(), path) for path, item in document(__version__)["paths"].items()
                  for method in item}
    # (schemathesis also sends verbs a path does not take, which must be 405s)
    assert operations <= SEEN["writable"]
    assert operations <= SEEN["read_only"]
