"""Layer rules read from the source with `ast`: imports go one way and the core never prints.

discover -> graph -> plan -> run -> store; cli/ and server/ only call layers and render.
Every import counts, including ones inside functions: a lazy import is still a dependency.
Nothing here imports the modules it checks.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "barca"


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. "barca.planner.planner"
    path: Path
    tree: ast.Module

    @property
    def rel(self) -> str:
        return self.path.relative_to(SRC).as_posix()


@lru_cache(maxsize=None)
def modules() -> tuple[Module, ...]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(Module(".".join(parts), path, ast.parse(path.read_text(), str(path))))
    return tuple(found)


def in_layer(module: Module, layer: str) -> bool:
    return module.name == layer or module.name.startswith(layer + ".")


def imported_names(module: Module) -> list[tuple[int, str]]:
    """(line, dotted name) of every import, relative ones resolved; `from a import b` gives
    both `a` and `a.b` so that importing a submodule by name is caught too."""
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    out = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out.append((node.lineno, base))
            out.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return out


def matches(name: str, forbidden: str) -> bool:
    return name == forbidden or name.startswith(forbidden + ".")


def violations(layers: tuple[str, ...], forbidden: tuple[str, ...],
               exclude: tuple[str, ...] = (), among: tuple[Module, ...] | None = None
               ) -> list[str]:
    """Imports of `forbidden` names by modules in `layers` (minus those in `exclude`), of
    the package or of the modules `among`."""
    found = []
    for module in modules() if among is None else among:
        if not any(in_layer(module, layer) for layer in layers):
            continue
        if any(in_layer(module, layer) for layer in exclude):
            continue
        for line, name in imported_names(module):
            for bad in forbidden:
                if matches(name, bad):
                    found.append(f"{module.rel}:{line} imports {name}")
    return sorted(set(found))


def test_the_walk_sees_the_layers_it_checks():
    names = {m.name for m in modules()}
    for expected in ("barca.planner.planner", "barca.graph", "barca.discover.model",
                     "barca.store.paths", "barca.state", "barca.cli.main"):
        assert expected in names
    # the walk must see real imports, or every rule below would pass vacuously
    assert violations(("barca.store",), ("sqlite3",)) != []
    assert violations(("barca.cli",), ("click",)) != []


# --- one-way imports -----------------------------------------------------------------------

CORE = ("barca.planner", "barca.graph", "barca.discover", "barca.state", "barca.packed_columns")
OUTER = ("barca.store", "barca.engine", "barca.cli", "barca.server", "sqlite3", "subprocess")


def test_core_layers_import_no_storage_execution_or_interface_layer():
    """plan, graph, discover and the state they share never reach store/run/cli/server,
    a database or a subprocess."""
    assert violations(CORE, OUTER) == []


def test_discover_imports_neither_graph_nor_plan():
    assert violations(("barca.discover",), ("barca.graph", "barca.planner", "barca.state")) == []


def test_graph_imports_no_plan():
    assert violations(("barca.graph",), ("barca.planner", "barca.state")) == []


def test_planner_does_no_io_and_reads_no_clock():
    """The planner is pure: no files, processes, sockets, clock or randomness."""
    impure = ("os", "pathlib", "io", "shutil", "tempfile", "time", "datetime", "random",
              "uuid", "socket", "signal", "threading", "multiprocessing", "concurrent")
    pure = ("barca.planner", "barca.state", "barca.packed_columns")
    assert violations(pure, impure + OUTER) == []
    calls = [f"{m.rel}:{node.lineno} calls {node.func.id}()"
             for m in modules() if any(in_layer(m, layer) for layer in pure)
             for node in ast.walk(m.tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and node.func.id in ("open", "print", "input", "exec", "eval", "__import__")]
    assert calls == []


# the step scheduler decides on plain data: no database, no files, no clock, no threads, and
# nothing of the engine it is the pure core of (the loop hands it what it needs)
SCHEDULER_IMPURE = ("os", "pathlib", "io", "shutil", "tempfile", "time", "datetime", "random",
                    "uuid", "socket", "signal", "threading", "multiprocessing", "concurrent",
                    "select", "subprocess", "sqlite3", "barca.store", "barca.engine",
                    "barca.cli", "barca.server", "barca.views")


def scheduler_impurities(among: tuple[Module, ...] | None = None) -> list[str]:
    found = [v for v in violations(("barca.engine.step_scheduler",), SCHEDULER_IMPURE,
                                   among=among)]
    found += [f"{m.rel}:{node.lineno} calls {node.func.id}()"
              for m in (modules() if among is None else among)
              if m.name == "barca.engine.step_scheduler" for node in ast.walk(m.tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("open", "print", "input", "exec", "eval", "__import__")]
    return found


def test_the_step_scheduler_does_no_io_and_reads_no_clock():
    """Its transitions are functions of the state and the event, the time passed in: a table
    of literal cases tests them (tests/engine/test_step_scheduler.py)."""
    assert any(m.name == "barca.engine.step_scheduler" for m in modules())
    assert scheduler_impurities() == []


@pytest.mark.parametrize("source", ["import time\n", "from barca.store import metadata\n",
                                    "import sqlite3\n", "from os import path\n",
                                    "import threading\n",
                                    "from barca.engine.run_state import RunState\n",
                                    "def f():\n    return open('x')\n"])
def test_the_scheduler_rule_sees_what_it_forbids(source):
    bad = synthetic("barca.engine.step_scheduler", source)
    assert scheduler_impurities(among=(bad,)) != []


def test_store_imports_neither_run_nor_cli_nor_server():
    assert violations(("barca.store",), ("barca.engine", "barca.cli", "barca.server")) == []


def private_imports(trees) -> list[str]:
    """`from barca.x import _name`: a module reaching into another's private helpers."""
    return [f"{where}:{node.lineno} imports {node.module}.{alias.name}"
            for where, tree in trees for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("barca")
            for alias in node.names
            if alias.name.startswith("_") and not alias.name.startswith("__")]


def test_no_module_imports_private_helpers_of_another():
    """A helper two modules share is public in one of them (store.local_files, say)."""
    assert private_imports((m.rel, m.tree) for m in modules()) == []


def test_the_private_import_check_sees_one():
    tree = ast.parse("from barca.store.artifacts import _digest_file, table_kind")
    assert private_imports([("x.py", tree)]) == [
        "x.py:1 imports barca.store.artifacts._digest_file"]


# what runs a step reaches results only through the artifact-store seam (a store it opens by
# address), never a concrete store or local files: a remote store must be one more module
STEP_SIDE = ("barca.engine.worker",)
CONCRETE_STORES = ("barca.store.local_store", "barca.store.memory_store",
                   "barca.store.remote_store", "barca.store.local_files")


def test_the_step_side_reaches_results_only_through_the_store_seam():
    assert violations(STEP_SIDE, CONCRETE_STORES) == []


def test_the_store_seam_check_sees_a_concrete_store():
    assert violations(("barca.store.artifacts",), CONCRETE_STORES) != []


def test_only_cli_imports_click_or_rich():
    assert violations(("barca",), ("click", "rich"), exclude=("barca.cli",)) == []


def test_importing_the_planner_loads_no_outer_layer_at_runtime():
    """The same rule, transitively: what `import barca.planner.planner` actually loads."""
    code = ("import sys, barca.planner.planner, barca.graph, barca.discover, barca.state, "
            "barca.packed_columns\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('sqlite3', 'subprocess', 'click', 'rich', 'duckdb', 'pyarrow') or "
            "m.startswith(('barca.store', 'barca.engine', 'barca.cli', 'barca.server'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=SRC.parent)
    assert out.stdout.strip() == "[]"


# --- the core never prints -----------------------------------------------------------------

def print_calls(layer: str) -> list[str]:
    return sorted(f"{m.rel}:{node.lineno}" for m in modules() if in_layer(m, layer)
                  for node in ast.walk(m.tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id == "print")


@pytest.mark.parametrize("layer", [
    "barca.planner", "barca.graph", "barca.discover",
    "barca.store", "barca.engine",
])
def test_core_layer_never_prints(layer):
    """What the core has to say goes to a Reporter or into its result; cli/ renders it."""
    assert print_calls(layer) == []


def test_the_print_check_sees_prints():
    assert print_calls("barca.cli") != []


# --- the engine's seams ----------------------------------------------------------------------

def synthetic(name: str, source: str) -> Module:
    """A module that is not in the tree, to show that a rule sees what it forbids."""
    path = SRC / (name.replace(".", "/") + ".py")
    return Module(name, path, ast.parse(source))


def test_the_server_imports_nothing_of_the_cli():
    """The server runs through the driver and serialises views; it never builds what a user
    sees the CLI's way (the read-only commands of `--server` clients are parsed and run by
    its child, `barca.cli.served_views`)."""
    assert violations(("barca.server",), ("barca.cli",)) == []
    bad = synthetic("barca.server.bad", "from barca.cli.render import dry_run_table\n")
    assert violations(("barca.server",), ("barca.cli",), among=(bad,)) != []


def test_the_cli_runs_no_sql():
    """What a command shows is queried by store/ and shaped by views/; cli/ renders it."""
    found = [v for v in violations(("barca.cli",), ("sqlite3",))]
    assert found == []
    bad = synthetic("barca.cli.bad", "import sqlite3\n")
    assert violations(("barca.cli",), ("sqlite3",), among=(bad,)) != []


def test_the_python_api_imports_nothing_of_the_cli():
    """`barca.get`, `barca.history` and the rest return views, as the CLI prints them."""
    assert violations(("barca.python_api", "barca.api"), ("barca.cli",)) == []
    bad = synthetic("barca.python_api", "from barca.cli.history import runs_json\n")
    assert violations(("barca.python_api",), ("barca.cli",), among=(bad,)) != []


def test_views_import_no_interface_layer():
    """Views are what the CLI, the Python API and the server all show: none of theirs."""
    assert violations(("barca.views",), ("barca.cli", "barca.server", "barca.python_api",
                                         "click", "rich")) == []
    bad = synthetic("barca.views.bad", "import click\n")
    assert violations(("barca.views",), ("click",), among=(bad,)) != []


def test_engine_and_store_import_no_interface_layer():
    assert violations(("barca.engine", "barca.store"),
                      ("barca.cli", "barca.server", "click", "rich")) == []


# views read the engine's results; the engine reaches back for one thing only: the words of
# the lines its recorder keeps in a run's logs (its notes, what the logs cut), as the engine
# writes no English of its own. The planner, pure, reaches none.
ENGINE_USES_OF_VIEWS = ("barca.views.warning_text",)


def engine_uses_of_views(among: tuple[Module, ...] | None = None) -> list[str]:
    return [v for v in violations(("barca.engine", "barca.planner", "barca.store"),
                                  ("barca.views",), among=among)
            if not any(v.endswith(f" imports {ok}") or f" imports {ok}." in v
                       for ok in ENGINE_USES_OF_VIEWS)
            or not v.startswith("barca/engine/")]


def test_the_engine_reaches_views_only_for_the_words_of_what_it_records():
    assert engine_uses_of_views() == []
    assert engine_uses_of_views(among=(synthetic("barca.engine.bad",
                                                 "from barca.views.status import x\n"),))
    assert engine_uses_of_views(among=(synthetic("barca.planner.bad",
                                                 "from barca.views import warning_text\n"),))


def test_the_local_executor_is_private_to_the_engine():
    """Outside engine/local/, its modules are reached only by the pool's own process (the
    launcher, which serves them); everything else uses the package's names."""
    found = []
    for module in modules():
        if in_layer(module, "barca.engine.local") or module.name == "barca.cli.warm_launcher":
            continue
        found += [f"{module.rel}:{line} imports {name}" for line, name in imported_names(module)
                  if name.startswith("barca.engine.local.")
                  and name.removeprefix("barca.engine.local.") not in LOCAL_PUBLIC]
    assert found == []


LOCAL_PUBLIC = ("local_executor", "pool_size", "capacity", "warm_seconds", "running_pool",
                "warm_pool_supported", "warm_pools", "stop_warm_pools", "start_served_run",
                "start_warm_pool", "end_pools_with_this_process", "environment_identity",
                "shared_capacity_env")


# what a worker imports to run a step: the messages both sides share, never the coordinator's
# modules (an executor on another machine imports engine.worker alone)
WORKER_MAY_IMPORT = ("barca.engine.worker", "barca.engine.protocol")


def worker_side_violations(among: tuple[Module, ...] | None = None) -> list[str]:
    return [v for v in violations(("barca.engine.worker",), ("barca.engine",), among=among)
            if not any(v.endswith(f" imports {ok}") or f" imports {ok}." in v
                       for ok in WORKER_MAY_IMPORT)]


def test_the_worker_side_imports_nothing_of_the_coordinator_side():
    assert worker_side_violations() == []
    bad = synthetic("barca.engine.worker.bad", "from barca.engine.step_scheduler import x\n")
    assert worker_side_violations(among=(bad,)) != []


def test_the_coordinator_knows_executors_only_by_their_protocol():
    assert violations(("barca.engine.coordinator",),
                      ("barca.engine.local", "barca.engine.inprocess", "barca.engine.ray_executor",
                       "barca.engine.worker.step_runner")) == []


def ray_imports(among: tuple[Module, ...] | None = None) -> list[str]:
    return violations(("barca",), ("ray",), exclude=RAY_SIDE, among=among)


# the Ray executor: the coordinator's half, its connecting to a cluster, the worker's half
RAY_SIDE = ("barca.engine.ray_executor", "barca.engine.ray_cluster",
            "barca.engine.worker.ray_lease")


def test_only_the_ray_executor_imports_ray():
    """Ray is an extra, imported only when a run chooses it (`--executor ray`)."""
    assert ray_imports() == []
    assert ray_imports(among=(synthetic("barca.engine.bad", "import ray\n"),))


def test_only_the_driver_starts_runs():
    """Callers (cli/, the Python API, a server) enter through the driver, never the
    coordinator or an executor."""
    callers = ("barca.cli", "barca.python_api", "barca.server")
    assert violations(callers, ("barca.engine.coordinator", "barca.engine.request",
                                "barca.engine.inprocess", "barca.engine.worker.step_runner")) == []


# the server runs through the driver and shows what barca.views builds; what it writes
# besides runs (its queue, when schedules fired, runs killed at shutdown) goes through
# engine.serving; barca.view_commands names the read-only commands its child runs for
# `--server` clients
SERVER_MAY_IMPORT = ("barca.server", "barca.engine.driver", "barca.engine.serving",
                     "barca.engine.result", "barca.engine.events", "barca.views",
                     "barca.printable", "barca.view_commands",
                     "barca.errors", "barca.schedules", "barca.__version__", "barca.config",
                     # the ledger's reads and writes (a client's run recorded, its lookups)
                     "barca.engine.ledger_server")


def test_the_server_imports_nothing_of_the_store():
    """The server serialises what views return and writes through engine.serving: it holds
    no database connection and names no table, so the store can change under it."""
    assert violations(("barca.server",), ("barca.store", "sqlite3")) == []
    assert not [ok for ok in SERVER_MAY_IMPORT if matches(ok, "barca.store")]
    bad = synthetic("barca.server.bad", "from barca.store.history import list_runs\n"
                                        "import sqlite3\n")
    assert violations(("barca.server",), ("barca.store", "sqlite3"), among=(bad,)) == [
        "barca/server/bad.py:1 imports barca.store.history",
        "barca/server/bad.py:1 imports barca.store.history.list_runs",
        "barca/server/bad.py:2 imports sqlite3"]


def test_the_server_imports_only_the_driver_and_the_renderers():
    found = [f"{m.rel}:{line} imports {name}" for m in modules() if in_layer(m, "barca.server")
             for line, name in imported_names(m)
             if name.startswith("barca.") and not any(matches(name, ok)
                                                      for ok in SERVER_MAY_IMPORT)]
    assert found == []


# --- module shape --------------------------------------------------------------------------

def test_every_module_starts_with_a_docstring():
    missing = [m.rel for m in modules()
               if not (m.tree.body and isinstance(m.tree.body[0], ast.Expr)
                       and isinstance(m.tree.body[0].value, ast.Constant)
                       and isinstance(m.tree.body[0].value.value, str)
                       and m.tree.body[0].value.value.strip())]
    assert missing == []


# --- module size ---------------------------------------------------------------------------

MAX_LINES = 400

# Over the limit today, each being split by its item of issue 27: the entry goes with the split.
LONG_FOR_NOW: tuple[str, ...] = ()


def too_long(texts: dict[str, str], limit: int = MAX_LINES) -> list[str]:
    """`path: N lines` for each text of more than `limit` lines."""
    counts = {rel: len(text.splitlines()) for rel, text in texts.items()}
    return sorted(f"{rel}: {n} lines" for rel, n in counts.items() if n > limit)


def source_texts() -> dict[str, str]:
    return {m.rel: m.path.read_text() for m in modules()}


def test_no_module_is_over_400_lines():
    """A module that long holds more than one concern: split it by concern, one a module."""
    texts = source_texts()
    assert too_long({rel: text for rel, text in texts.items() if rel not in LONG_FOR_NOW}) == []


def test_the_long_modules_allowed_for_now_are_still_long():
    """An entry of LONG_FOR_NOW is removed once its module is split (or gone), so that the
    list only shrinks and nothing grows back under it."""
    texts = source_texts()
    assert [rel for rel in LONG_FOR_NOW if not too_long({rel: texts.get(rel, "")})] == []


def test_the_length_check_sees_a_long_module():
    texts = {"barca/long.py": "x = 1\n" * 401, "barca/short.py": "x = 1\n" * 400}
    assert too_long(texts) == ["barca/long.py: 401 lines"]


# --- cli/ parses and renders ---------------------------------------------------------------

STORAGE_CALLS = ("execute", "executemany", "executescript", "sql", "unlink", "rmdir", "rmtree",
                 "remove")


def storage_calls(layer: str) -> list[str]:
    return sorted(f"{m.rel}:{node.lineno} calls .{node.func.attr}()" for m in modules()
                  if in_layer(m, layer) for node in ast.walk(m.tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in STORAGE_CALLS)


def test_cli_runs_no_sql_and_deletes_no_files():
    """Queries, views, checks and deletions belong to store/; cli/ calls it and renders."""
    assert violations(("barca.cli",), ("duckdb",)) == []
    assert storage_calls("barca.cli") == []


def test_the_storage_check_sees_storage_calls():
    assert storage_calls("barca.store") != []



# --- telemetry -------------------------------------------------------------------------------

# each tracing library is imported by its own backend alone (barca.telemetry), which is loaded
# only when BARCA_TELEMETRY names it; the engine reaches telemetry through its interface
TRACING_BACKENDS = {"opentelemetry": "barca.telemetry.otel", "ddtrace": "barca.telemetry.datadog"}


def tracing_imports(among: tuple[Module, ...] | None = None) -> list[str]:
    found = []
    for library, backend in TRACING_BACKENDS.items():
        found += violations(("barca",), (library,), exclude=(backend,), among=among)
    found += violations(("barca",), tuple(TRACING_BACKENDS.values()),
                        exclude=("barca.telemetry",), among=among)
    return found


def test_only_each_telemetry_backend_imports_its_tracing_library():
    assert tracing_imports() == []
    assert tracing_imports(among=(synthetic("barca.engine.bad",
                                            "from opentelemetry import trace\n"),))
    assert tracing_imports(among=(synthetic("barca.telemetry.otel", "import ddtrace\n"),))
    assert tracing_imports(among=(synthetic("barca.engine.bad",
                                            "from barca.telemetry import otel\n"),))
