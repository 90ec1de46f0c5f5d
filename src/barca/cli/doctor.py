"""`barca doctor [FILES]`: check that barca can run here, and say what to fix.

Checks, in order: the Python running barca (and its workers), barca itself, the project root,
its barca.toml settings (with the capacity they give), the pipeline sources (parsed, never
imported), names their top-level code reads but never defines (a NameError on import), the
packages the pipeline's annotations and top-level imports need (looked up, never imported),
that `.barca/` can be written (probed, never created), the metadata database's schema
version (opened read-only, never migrated), and with a `[remote]` the shared store (reached,
credentials taken, a probe object written and removed, results listed). Exit 0 when every
check passes, 3 when one fails (the report still goes to stdout).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from barca import __version__
from barca.cli.load import split_positionals
from barca.views.plan_text import human_size
from barca.cli.output import choose_mode, emit, emit_json
from barca.cli.server_option import server_options
from barca.errors import InfraError, UsageError
from barca.printable import printable_lines
from barca.project import Project, open_project
from barca.store.db import SCHEMA_VERSION, UPGRADABLE, describe

# Libraries an annotation names by their usual module name even without an import line.
KNOWN_MODULES = ("pandas", "polars", "pyarrow", "duckdb", "numpy")

HELP = """Check the prerequisites of this project and say what to fix.

\b
Python version, barca (and whether its compiled module was built), the barca.toml settings,
the pipeline sources, names their top-level code uses but never defines or imports, the
packages their annotations and imports need, a writable .barca/, the metadata schema version,
and with a [remote] the shared store (reachable, credentials, writable with a probe object
removed after, listing). Runs no step and imports no pipeline code.
\b
Examples:
  barca doctor
  barca doctor pipeline.py --json
"""


@dataclass(slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@click.command("doctor", help=HELP)
@server_options
@click.argument("files", nargs=-1)
@click.option("--json", "json_flag", is_flag=True, help="JSON output (default when stdout is "
              "not a terminal).")
@click.option("--pretty", is_flag=True, help="Human output (default in a terminal).")
@click.option("--env", "env_name", metavar="NAME", help="Check environment NAME (or set "
              "BARCA_ENV).")
def doctor_command(files, json_flag, pretty, env_name) -> None:
    mode = choose_mode(json_flag, pretty)
    _, paths = split_positionals(files, takes_target=False)
    # a bad barca.toml or a file where .barca/ should be is a failed check here
    project = open_project(env_name, read_config=False, check_state=False)
    checks = [check_python(), check_barca(), check_project(project), check_config(project)]
    sources, definitions = check_sources(project, paths)
    checks += [sources, check_top_level(project, definitions),
               check_packages(project, definitions), check_cache(project),
               check_metadata(project), check_warm_pool(project)]
    checks += [c for c in [check_store(project)] if c is not None]
    ok = all(c.ok for c in checks)
    if mode == "json":
        emit_json({"ok": ok, "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail,
                                         "fix": c.fix, "data": c.data} for c in checks]},
                  indent=True)
    else:
        emit(printable_lines(_line(c) for c in checks))  # details quote the user's files
    failed = [c.name for c in checks if not c.ok]
    if failed:
        raise InfraError(f"doctor found {len(failed)} problem{'s' if len(failed) > 1 else ''}: "
                         f"{', '.join(failed)}", "apply the fix printed for each failed check")


def _line(check: Check) -> str:
    if check.ok:
        return f"[ok] {check.name}: {check.detail}"
    return f"[error] {check.name}: {check.detail}" + (f"; fix: {check.fix}" if check.fix else "")


def check_python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    data = {"version": version, "executable": sys.executable}
    if sys.version_info < (3, 11):
        return Check("python", False, f"Python {version} is older than 3.11",
                     "install Python 3.11 or newer and reinstall barca with it", data)
    return Check("python", True, f"Python {version} ({sys.executable})", data=data)


def check_barca() -> Check:
    """Where barca runs from, and whether its compiled module was built (optional: without
    it a keyed source's keys are sorted and packed in Python, slower at many keys)."""
    where = str(Path(__file__).resolve().parents[1])
    try:  # decided as engine.worker.key_source decides: a file that does not load is not built
        import barca.key_packing  # noqa: F401
        compiled = True
    except ImportError:
        compiled = False
    packing = "keys packed in C" if compiled else (
        "keys packed in Python (no C compiler when it was installed: install one and "
        "reinstall barca for faster ticks at many keys)")
    return Check("barca", True, f"barca {__version__} ({where}), {packing}",
                 data={"version": __version__, "path": where, "compiled": compiled})


def check_project(project: Project) -> Check:
    marker = "barca.toml" if (project.root / "barca.toml").is_file() else \
        "no barca.toml: the current directory"
    return Check("project", True, f"root {project.root} ({marker}), environment {project.env}",
                 data={"root": str(project.root), "env": project.env,
                       "state_dir": str(project.state_dir)})


def check_config(project: Project) -> Check:
    """barca.toml's settings, checked as every other command checks them, and what they make
    of the run's capacity and the cache's size limit."""
    from barca.config import read_settings
    from barca.engine.local import capacity, pool_size

    from dataclasses import replace

    from barca.store.cache_limit import cache_limit

    try:
        settings = read_settings(project.root)
        units, source = capacity(settings.capacity)
        size = pool_size()
        limit = cache_limit(replace(project, settings=settings))
    except UsageError as exc:
        return Check("config", False, exc.message, exc.remediation)
    data = {"capacity": units, "capacity_source": source, "pool_size": min(size, units),
            "cache_max_size": limit.bytes, "cache_max_size_source": limit.source}
    cache = f"no cache size limit ({limit.source} off)" if limit.bytes is None else \
        f"cache trimmed after each run above {human_size(limit.bytes)} ({limit.describe()})"
    return Check("config", True, f"capacity {units} ({source}), {cache}", data=data)


def check_sources(project: Project, paths: list[str]) -> tuple[Check, tuple]:
    from barca.discover import load_definitions

    try:
        definitions = load_definitions(project.root, [str(Path(p).resolve()) for p in paths])
    except UsageError as exc:
        return Check("sources", False, exc.message, exc.remediation), ()
    files = sorted({d.file for d in definitions})
    nodes = f"{len(definitions)} node{'s' if len(definitions) != 1 else ''}"
    return Check("sources", True, f"{nodes} in {len(files)} "
                 f"file{'s' if len(files) != 1 else ''}: {', '.join(files)}",
                 data={"files": files, "nodes": len(definitions)}), definitions


def check_top_level(project: Project, definitions: tuple) -> Check:
    """Names the files' top-level code reads that nothing defines: a NameError on import,
    which would fail whichever step imports the file first."""
    from barca.discover.undefined_names import undefined_names

    problems = []
    for file in sorted({d.file for d in definitions}):
        try:
            found = undefined_names((project.root / file).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        problems += [{"file": file, "line": u.line, "name": u.name} for u in found]
    data = {"undefined": problems}
    if not problems:
        return Check("top_level", True, "every name the files' top-level code reads is "
                     "defined or imported", data=data)
    listed = "; ".join(f"{p['file']} line {p['line']} uses '{p['name']}'" for p in problems[:5])
    more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
    first = problems[0]
    return Check("top_level", False, f"{listed}{more}, never defined or imported: importing "
                 "the file raises NameError", f"import or define '{first['name']}' in "
                 f"{first['file']} (e.g. `import {first['name']}` at its top)", data)


def check_packages(project: Project, definitions: tuple) -> Check:
    """Every module an annotation or a top-level import of a pipeline file needs."""
    needs: dict[str, list[str]] = {}
    for file in sorted({d.file for d in definitions}):
        aliases, required = _imports(project.root, file)
        for module in required:
            needs.setdefault(module, []).append(f"imported by {file}")
        for d in (d for d in definitions if d.file == file):
            for param, text in d.annotations:
                for module in _annotation_modules(text, aliases):
                    needs.setdefault(module, []).append(
                        f"{d.node_id} {'returns' if param == 'return' else 'reads'} {text}")
    missing = {m: why for m, why in needs.items() if importlib.util.find_spec(m) is None}
    data = {"needed": sorted(needs), "missing": sorted(missing)}
    if missing:
        detail = "; ".join(f"{m} is not installed ({'; '.join(why[:2])})" for m, why in
                           sorted(missing.items()))
        return Check("packages", False, detail, f"install them into {sys.executable}, e.g. "
                     f"{sys.executable} -m pip install {' '.join(sorted(missing))}", data)
    found = ", ".join(sorted(needs)) or "no third-party package"
    return Check("packages", True, f"{found} importable", data=data)


def _imports(root: Path, file: str) -> tuple[dict[str, str], list[str]]:
    """(name bound -> module it comes from, external modules imported unconditionally)."""
    try:
        tree = ast.parse((root / file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}, []
    aliases: dict[str, str] = {}
    required: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            pairs = [(a.asname or a.name.split(".")[0], a.name) for a in stmt.names]
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            pairs = [(a.asname or a.name, stmt.module) for a in stmt.names]
        else:
            continue
        for bound, module in pairs:
            top = module.split(".")[0]
            if top == "barca" or top in sys.stdlib_module_names or _local(root, file, top):
                continue
            aliases[bound] = top
            required.append(top)
    return aliases, list(dict.fromkeys(required))


def _local(root: Path, file: str, name: str) -> bool:
    for folder in (root / file).parent, root:
        if (folder / f"{name}.py").exists() or (folder / name).is_dir():
            return True
    return False


def _annotation_modules(text: str, aliases: dict[str, str]) -> list[str]:
    names = re.findall(r"(?<![\w.])([A-Za-z_]\w*)", text)
    out = []
    for name in names:
        module = aliases.get(name) or (name if name in KNOWN_MODULES else None)
        if module and module not in out:
            out.append(module)
    return out


def check_cache(project: Project) -> Check:
    target = project.state_dir
    if target.is_dir():
        try:
            with tempfile.NamedTemporaryFile(dir=target, prefix=".doctor-", delete=True):
                pass
        except OSError as exc:
            return Check("cache", False, f"{target} is not writable: {exc.strerror}",
                         f"make {target} writable by this user (chmod u+w), or use another "
                         "--env", {"path": str(target), "exists": True})
        return Check("cache", True, f"{target} is writable",
                     data={"path": str(target), "exists": True})
    blocker = project.state_blocker()
    if blocker is not None:
        return Check("cache", False, f"{blocker} is not a directory, so {target} cannot be "
                     "created",
                     f"move {blocker} out of the way", {"path": str(target), "exists": False})
    parent = next(p for p in (target, *target.parents) if p.exists())
    if not os.access(parent, os.W_OK | os.X_OK):
        return Check("cache", False, f"{target} does not exist and {parent} is not writable",
                     f"make {parent} writable, or run barca from a project you can write to",
                     {"path": str(target), "exists": False})
    return Check("cache", True, f"{target} will be created by the first `barca get` "
                 f"({parent} is writable)", data={"path": str(target), "exists": False})


def check_metadata(project: Project) -> Check:
    path = project.db_path
    data: dict[str, Any] = {"path": str(path), "exists": path.exists(),
                            "schema_version": None, "expected": SCHEMA_VERSION}
    if not path.exists():
        return Check("metadata", True, f"no database yet at {path}; the first `barca get` "
                     "creates it", data=data)
    try:
        version, runs = describe(path)
    except UsageError as exc:  # another tool's database (store.db.published_layout)
        return Check("metadata", False, exc.message, exc.remediation, data)
    except InfraError as exc:
        return Check("metadata", False, exc.message,
                     f"move {path} aside (history and cache records are lost) and run again",
                     data)
    data["schema_version"] = version
    if version in UPGRADABLE:
        return Check("metadata", True, f"schema version {version}, {runs} run"
                     f"{'s' if runs != 1 else ''} recorded; the next barca command upgrades it "
                     f"to version {SCHEMA_VERSION}", data=data)
    if version not in (0, SCHEMA_VERSION):
        return Check("metadata", False, f"{path} has schema version {version}; this barca "
                     f"reads version {SCHEMA_VERSION}",
                     "use the barca version that wrote it, or use another --env", data)
    return Check("metadata", True, f"schema version {version or SCHEMA_VERSION}, {runs} "
                 f"run{'s' if runs != 1 else ''} recorded", data=data)


def check_store(project: Project) -> Check | None:
    """With a `[remote]` (or BARCA_REMOTE_URI): whether runs can use the shared store; None
    without one. A barca.toml that cannot be read is the config check's to report."""
    from barca.config import read_settings
    from barca.store.remote_config import remote_of
    from barca.store.remote_probe import probe_project

    try:
        settings = read_settings(project.root)
    except UsageError:
        return None
    try:
        remote = remote_of(settings)
    except UsageError as exc:
        return Check("store", False, exc.message, exc.remediation)
    if remote is None:
        return None
    found = probe_project(project, remote)
    return Check("store", found.ok, found.detail, found.fix, found.data)


def check_warm_pool(project: Project) -> Check:
    """Says what the background process found next to a project is, and how to turn it off."""
    from barca.engine.local import running_pool, warm_pool_supported, warm_seconds
    from barca.errors import UsageError

    try:
        idle = warm_seconds()
    except UsageError as exc:
        return Check("warm", False, exc.message, exc.remediation)
    if idle <= 0:
        return Check("warm", True, "off (BARCA_WARM_SECONDS=0): every worker starts fresh",
                     data={"idle_seconds": 0, "pid": None})
    if not warm_pool_supported():
        return Check("warm", True, "not available on this platform: workers start fresh",
                     data={"idle_seconds": idle, "pid": None})
    pool = running_pool(project.root)
    if pool is None:
        return Check("warm", True, "no warm pool running; the next run that needs workers "
                     f"starts one, which exits after {idle:g} s without a run",
                     data={"idle_seconds": idle, "pid": None})
    pid, modules = pool
    return Check("warm", True, f"warm pool pid {pid} holds {modules} imported "
                 f"modules; it exits after {idle:g} s without a run (BARCA_WARM_SECONDS=0 "
                 "turns it off)", data={"idle_seconds": idle, "pid": pid, "modules": modules})
