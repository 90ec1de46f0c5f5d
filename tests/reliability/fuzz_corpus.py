"""A corpus of malformed pipelines, values, command lines and environments (issue 13).

Each case is a project (its files), a barca command line with its environment, and what barca
must answer: exit 2 with a message naming the cause, or, for what shows only when a step runs
(a key source's value, a result that cannot be stored), a failed step naming it; never a
traceback with a frame of barca's own code. Hand-written cases cover each way in;
`mutation_cases()` breaks one decorator argument of one valid pipeline at a time, and
`make_cases(n, seed)` draws any number of cases from those mutations, on varied spellings of
the pipeline, and from random malformed key-source values, for a longer soak run
(benchmarks/soak.py). `problems()` is the verdict, shared by tests/reliability/test_fuzz.py
and the soak. Nothing here runs barca; callers do, with the real CLI.

`http_cases()` (issue 26) are requests to a real `barca serve`, as raw bytes: malformed
bodies and framings, hostile hosts, origins, content types and headers, oversized names,
lists, query strings and numbers, paths that try to leave where they point, and bytes that
are not HTTP; `http_problems()` is their verdict (tests/reliability/test_fuzz_http.py).
"""

from __future__ import annotations

import json
import random
import re
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator, Mapping

import barca

BARCA_SOURCE = str(Path(barca.__file__).parent) + "/"  # a frame here is barca's own
_FRAME = re.compile(r'File \\?"' + re.escape(BARCA_SOURCE) + r'[^"\\]*')  # also in JSON


@dataclass(frozen=True)
class Case:
    """One command on one project. `cause`: words the error must hold (the JSON envelope's
    `error` and `remediation`); `cwd`: where barca runs, the project root (holds barca.toml),
    relative to the case's directory; file paths are relative to it and may leave it."""

    id: str
    files: Mapping[str, str | bytes]
    args: tuple[str, ...]
    cause: tuple[str, ...]
    code: int = 2
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = "."

    def write(self, directory: Path) -> Path:
        """Write the project under `directory`; returns the directory to run barca in."""
        root = directory / self.cwd
        root.mkdir(parents=True, exist_ok=True)
        (root / "barca.toml").write_text("")
        for rel, text in self.files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):
                path.write_bytes(text)
            else:
                path.write_text(textwrap.dedent(text).lstrip("\n"))
        return root


@dataclass(frozen=True)
class ValueCase:
    """A node whose returned value is malformed, in a pipeline file of its own.

    kind: "source" (a sensor whose value gives a reader its keys), "asset-source" (the same
    from an asset), "sensor" or "asset".
    cause: words the step's error must hold; empty for a value that is odd but valid (a key
    such as "../x"), which must run and stay inside .barca/artifacts/.
    """

    id: str
    kind: str
    body: str  # statements of the function, ending in a return
    cause: tuple[str, ...]
    head: str = ""  # module-level lines: imports, helpers
    decorator: str = ""  # arguments of the node's decorator
    file: str | None = None  # the file's name, when it matters

    def pipeline(self) -> str:
        decorator = "sensor" if self.kind in ("source", "sensor") else "asset"
        body = textwrap.indent(textwrap.dedent(self.body).strip(), "    ")
        text = (f"from barca import asset, partitions_from, sensor\n{self.head}\n\n"
                f"@{decorator}({self.decorator})\n"
                f"def out():\n{body}\n")
        if self.kind.endswith("source"):
            text += ('\n\n@asset(partitions={"key": partitions_from(out)})\n'
                     "def reader(key: str, out=None):\n    return key\n")
        return text

    def as_case(self) -> Case:
        """The same value alone in a project, computed by `barca get`."""
        file = self.file or "p.py"
        return Case(f"value/{self.id}", {file: self.pipeline()}, ("get", file), self.cause,
                    code=1 if self.cause else 0)


# -- the verdict -----------------------------------------------------------------------------

def barca_frames(text: str) -> list[str]:
    """Traceback frames in `text` (as printed, or inside a JSON string) in barca's source."""
    return _FRAME.findall(text)


def error_text(stderr: str) -> str:
    """The error and remediation of the JSON envelope (the last stderr line), or ""."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    try:
        envelope = json.loads(lines[-1]) if lines else {}
    except ValueError:
        return ""
    if not isinstance(envelope, dict):
        return ""
    return f"{envelope.get('error') or ''}\n{envelope.get('remediation') or ''}"


def problems(case: Case, code: int, stdout: str, stderr: str) -> list[str]:
    """What is wrong with barca's answer to `case`: nothing, for a good answer."""
    out = []
    frames = barca_frames(stdout + stderr)
    if frames:
        out.append(f"a traceback with barca's own frames: {frames[-1]}")
    if code != case.code:
        out.append(f"exit {code}, expected {case.code}")
    if case.code == 2 and "Traceback (most recent call last)" in stderr:
        out.append("a traceback printed for a usage error")
    message = error_text(stderr)
    missing = [word for word in case.cause if word not in message]
    if missing:
        out.append(f"the error does not name {missing}: {message.strip() or '(no envelope)'}")
    return out


# -- hand-written cases ----------------------------------------------------------------------

BASE = """
from barca import (Schedule, asset, asset_ref, batches, collect, partitions, partitions_from,
                   sensor, task)


@asset()
def up() -> int:
    return 1


@asset(partitions={"region": partitions(["emea", "amer"])})
def per(region: str) -> str:
    return region


@task(inputs={"u": up})
def pub(u: int) -> None:
    print(u)

"""


def _pipe(extra: str) -> dict[str, str]:
    return {"p.py": BASE + textwrap.dedent(extra).lstrip("\n")}


def _node(decorator: str, signature: str = "()", body: str = "return 1",
          head: str = "", kind: str = "asset") -> dict[str, str]:
    """BASE plus one node `x`: `@asset(<decorator>) def x<signature>: <body>`."""
    return _pipe(f"{head}\n@{kind}({decorator})\ndef x{signature}:\n    {body}\n")


LIST = ("list", "p.py")
DRY = ("get", "x", "p.py", "--dry-run")


def _decorator_cases() -> Iterator[Case]:
    c = Case
    yield c("decorator/positional-argument", _node('"x"'), LIST,
            ("takes no positional arguments",))
    yield c("decorator/star-args", _node("*ARGS", head="ARGS = []"), LIST,
            ("cannot be read without running",))
    yield c("decorator/double-star-options", _node("**OPTS", head="OPTS = {}"), LIST,
            ("cannot be read without running",))
    yield c("decorator/two-barca-decorators",
            _pipe("@asset()\n@task()\ndef x():\n    return 1\n"), LIST,
            ("more than one barca decorator",))
    yield c("decorator/async-function", _pipe("@asset()\nasync def x():\n    return 1\n"),
            LIST, ("x is async", "asyncio.run"))
    yield c("decorator/on-a-class", _pipe("@asset()\nclass X:\n    pass\n"), LIST,
            ("decorates class X",))
    yield c("decorator/sensor-with-inputs", _node('inputs={"u": up}', "(u)", kind="sensor"),
            LIST, ("cannot have inputs",))
    yield c("decorator/sensor-with-parameter", _node("", "(a)", kind="sensor"), LIST,
            ("parameter 'a'", "a sensor takes no inputs"))
    yield c("decorator/parameter-nothing-supplies", _node("", "(a)"), LIST,
            ("parameter 'a' of x has no default",))
    yield c("decorator/keyword-only-parameter", _node("", "(*, a)"), LIST,
            ("parameter 'a' of x has no default",))
    yield c("decorator/dimension-also-an-input",
            _node('inputs={"k": up}, partitions={"k": partitions(["a"])}', "(k)"), LIST,
            ("both an input and a partition dimension",))
    yield c("decorator/keyword-repeated", _node("retries=2, retries=3"), LIST,
            ("keyword argument repeated",))
    yield c("decorator/parameter-repeated", _node("", "(a=1, a=2)"), LIST,
            ("duplicate argument 'a'",))
    yield c("decorator/inputs-name-mutated",
            _node("inputs=INPUTS", "(u=0)", head="INPUTS = {}\nINPUTS['u'] = up"), LIST,
            ("inputs=", "dict literal"))
    yield c("decorator/inputs-star-star", _node('inputs={**EXTRA}', "(u=0)",
                                                 head="EXTRA = {}"), LIST,
            ("inputs= keys must be parameter names",))
    yield c("decorator/inputs-lambda", _node('inputs={"u": lambda: 1}', "(u)"), LIST,
            ("input 'u' must name a node",))
    yield c("decorator/inputs-subscript", _node('inputs={"u": NODES[0]}', "(u)",
                                                 head="NODES = [up]"), LIST,
            ("input 'u' must name a node",))
    yield c("decorator/collect-nested", _node('inputs={"u": collect(collect(per))}', "(u)"),
            LIST, ("must name a node",))
    yield c("decorator/partitions-from-no-argument", _node(
        'partitions={"k": partitions_from()}', "(k)"), LIST,
        ("partitions_from() takes exactly one positional argument",))
    yield c("decorator/partitions-from-a-literal", _node(
        'partitions={"k": partitions_from(["a"])}', "(k)"), LIST,
        ("must name a node",))
    yield c("decorator/schedule-keyword", _node('freshness=Schedule(cron="* * * * *")'), LIST,
            ("Schedule() takes exactly one positional argument",))
    yield c("decorator/asset-ref-no-colon", _node('inputs={"u": asset_ref("up")}', "(u)"),
            LIST, ("asset_ref() needs a literal",))
    yield c("decorator/asset-ref-not-literal",
            _node('inputs={"u": asset_ref(REF)}', "(u)", head='REF = "p.py:up"'), LIST,
            ("asset_ref() needs a literal",))


def _graph_cases() -> Iterator[Case]:
    c = Case
    yield c("graph/input-dotted-module", _node('inputs={"u": os.path}', "(u)",
                                                head="import os"), LIST,
            ("names no @asset/@sensor/@task",))
    yield c("graph/asset-ref-missing-file", _node('inputs={"u": asset_ref("no.py:up")}', "(u)"),
            LIST, ("names no @asset/@sensor/@task",))
    yield c("graph/asset-ref-leaves-the-root",
            _node('inputs={"u": asset_ref("../../etc/p.py:up")}', "(u)"), LIST,
            ("names no @asset/@sensor/@task",))
    yield c("graph/cycle-of-two", _pipe("""
        @asset(inputs={"b": y})
        def x(b):
            return b

        @asset(inputs={"a": x})
        def y(a):
            return a
        """), LIST, ("cycle in the pipeline", "p.py:x", "p.py:y"))
    yield c("graph/cycle-of-three", _pipe("""
        @asset(inputs={"c": z})
        def x(c):
            return c

        @asset(inputs={"a": x})
        def y(a):
            return a

        @asset(inputs={"b": y})
        def z(b):
            return b
        """), LIST, ("cycle in the pipeline", "p.py:z"))
    yield c("graph/partitioned-other-dimension",
            _node('partitions={"k": partitions(["a"])}, inputs={"r": per}', "(k, r)"), LIST,
            ("does not read it key by key",))
    yield c("graph/keys-from-two-dimensions", _pipe("""
        @asset(partitions={"a": partitions(["1"]), "b": partitions(["2"])})
        def m(a, b):
            return 1

        @asset(partitions={"a": partitions_from(m)})
        def x(a, m):
            return m
        """), LIST, ("needs a single-dimension upstream",))
    yield c("graph/same-function-twice", _pipe("@asset()\ndef up():\n    return 2\n"), LIST,
            ("node id 'p.py:up' is already used",))
    yield c("graph/name-taken", _node('name="per"'), LIST,
            ("node id 'p.py:per' is already used",))
    yield c("graph/input-ambiguous", {
        "p.py": "from barca import asset\n\n@asset(inputs={'x': g})\ndef up(x):\n    return x\n",
        "a.py": "from barca import asset\n\n@asset()\ndef g():\n    return 1\n",
        "b.py": "from barca import asset\n\n@asset()\ndef g():\n    return 2\n"},
            ("list",), ("is ambiguous", "a.py:g", "b.py:g"))
    yield c("graph/import-not-a-node", {
        "p.py": "from barca import asset\nfrom helper import f\n\n"
                "@asset(inputs={'x': f})\ndef up(x):\n    return x\n",
        "helper.py": "def f():\n    return 1\n"},
            LIST, ("'f' is imported from helper", "no @asset/@task/@sensor named 'f'"))
    yield c("graph/import-from-a-file-not-read", {
        "p.py": "from barca import asset\nfrom other import g\n\n"
                "@asset(inputs={'x': g})\ndef up(x):\n    return x\n",
        "other.py": "from barca import asset\n\n@asset()\ndef g():\n    return 1\n"},
            LIST, ("pass other.py too",))


def _file_cases() -> Iterator[Case]:
    c = Case
    head = b"from barca import asset\n"
    node = b"\n@asset()\ndef up():\n    return 1\n"
    yield c("file/syntax-error", {"p.py": "from barca import asset\ndef (:\n"}, LIST,
            ("syntax error in p.py", "line 2"))
    yield c("file/unexpected-indent", {"p.py": "from barca import asset\n  x = 1\n"}, LIST,
            ("unexpected indent",))
    yield c("file/not-utf8", {"p.py": head + b"# \xff\xfe\n" + node}, LIST,
            ("p.py is not UTF-8",))
    yield c("file/latin1-coding-cookie",
            {"p.py": b"# -*- coding: latin-1 -*-\n" + head + b"# caf\xe9\n" + node}, LIST,
            ("p.py is not UTF-8",))
    yield c("file/nul-byte", {"p.py": head + b"x = 1\x00\n" + node}, LIST,
            ("null bytes",))
    yield c("file/parentheses-too-deep",
            {"p.py": "from barca import asset\nx = " + "(" * 300 + "1" + ")" * 300 + "\n"},
            LIST, ("too many nested parentheses",))
    yield c("file/expression-too-deep",
            {"p.py": "from barca import asset\nx = " + "1+" * 100_000 + "1\n"}, LIST,
            ("nested too deeply",))
    yield c("file/return-outside-function", {"p.py": "from barca import asset\nreturn 1\n"},
            LIST, ("'return' outside function",))
    yield c("file/nonlocal-at-module-level", {"p.py": "from barca import asset\nnonlocal q\n"},
            LIST, ("nonlocal declaration not allowed",))
    yield c("file/break-outside-loop", {"p.py": "from barca import asset\nbreak\n"}, LIST,
            ("'break' outside loop",))
    yield c("file/future-import-late",
            {"p.py": "from barca import asset\nfrom __future__ import annotations\n"}, LIST,
            ("from __future__ imports must occur",))
    yield c("file/helper-syntax-error", {
        "p.py": "from barca import asset\nimport helper\n\n"
                "@asset()\ndef up():\n    return helper.f()\n",
        "helper.py": "def f(:\n"}, LIST, ("syntax error in helper.py", "imported by p.py"))
    yield c("file/helper-not-utf8", {
        "p.py": "from barca import asset\nimport helper\n\n"
                "@asset()\ndef up():\n    return helper.f()\n",
        "helper.py": b"def f():\n    return '\xff'\n"}, LIST, ("helper.py is not UTF-8",))
    yield c("file/empty", {"p.py": ""}, ("get", "up", "p.py"), ("unknown target 'up'",))
    yield c("file/huge-with-one-bad-node-at-the-end", {
        "p.py": "from barca import asset\n" + "x = 1\n" * 50_000
                + "@asset(retries=0)\ndef up():\n    return 1\n"}, LIST,
            ("retries=", "line 50002"))
    yield c("file/directory-without-pipelines", {"p.py": "from barca import asset\n",
                                                  "lib/util.py": "x = 1\n"},
            ("list", "lib/"), ("no pipeline files found under lib/",))
    yield c("file/missing", {}, ("list", "nope.py"), ("file not found: nope.py",))
    yield c("file/not-python", {"data.txt": "x"}, ("list", "data.txt"),
            ("not a Python file",))
    yield c("file/outside-the-root", {"p.py": BASE, "../outside.py": BASE},
            ("list", "../outside.py"), ("is outside the project root",), cwd="project")


def _key_cases() -> Iterator[Case]:
    """Keys written as expressions, evaluated when a command plans (before anything runs)."""
    def keys(id: str, head: str, expr: str, cause: tuple[str, ...]) -> Case:
        return Case(f"keys/{id}", _node(f'partitions={{"k": partitions({expr})}}', "(k)",
                                        head=head), DRY, cause)

    yield keys("expression-raises", "", "1 / 0", ("ZeroDivisionError",))
    yield keys("not-iterable", "KEYS = 5", "KEYS", ("'int' object is not iterable",))
    yield keys("none", "KEYS = None", "KEYS", ("'NoneType' object is not iterable",))
    yield keys("a-string", 'KEYS = "emea"', "KEYS", ("it is a str",))
    yield keys("floats", "KEYS = [1.5]", "KEYS", ("partition key 1.5 is a float",))
    yield keys("a-key-twice", 'KEYS = ["a", "a"]', "KEYS", ("gives key 'a' twice",))
    yield keys("str-and-int-twice", 'KEYS = ["1", 1]', "KEYS", ("gives key '1' twice",))
    yield keys("undefined-name", "", "NOPE", ("NameError",))
    yield keys("file-calls-sys-exit", "import sys\nsys.exit(4)", "KEYS", ("SystemExit",))
    yield keys("file-raises-base-exception",
               "class Stop(BaseException):\n    pass\nraise Stop('at import')", "KEYS",
               ("Stop: at import",))
    yield keys("file-imports-a-missing-module", "import no_such_module_zz", "KEYS",
               ("ModuleNotFoundError",))
    yield keys("iteration-raises",
               "class K:\n    def __iter__(self):\n        raise RuntimeError('no keys')\n"
               "KEYS = K()", "KEYS", ("RuntimeError: no keys",))
    yield keys("literal-float", "", "[1.5]", ("partition key 1.5 is a float",))
    yield keys("literal-none", "", "[None]", ("partition key None is a NoneType",))
    yield keys("literal-bool", "", "[True]", ("partition key True is a bool",))
    yield keys("literal-str-and-int", "", '["1", 1]', ("partition key '1' appears twice",))


def _cli_cases() -> Iterator[Case]:
    files = _pipe("""
        @asset(inputs={"p": collect(per)})
        def total(p: list) -> int:
            return len(p)
        """)

    def cli(id: str, args: tuple[str, ...], cause: tuple[str, ...],
            env: Mapping[str, str] | None = None) -> Case:
        return Case(f"cli/{id}", files, args, cause, env=env or {})

    yield cli("unknown-target", ("get", "nope", "p.py"), ("unknown target 'nope'",))
    yield cli("empty-target-element", ("get", "up,,per", "p.py"), ("empty target",))
    yield cli("trailing-comma", ("get", "up,", "p.py"), ("empty target",))
    yield cli("target-with-a-key", ("get", "per[region=emea]", "p.py"), ("unknown target",))
    yield cli("target-id-of-another-file", ("get", "q.py:up", "p.py"), ("unknown target",))
    yield cli("get-a-task", ("get", "pub", "p.py"), ("is a task", "barca run pub"))
    yield cli("run-an-asset", ("run", "up", "p.py"), ("is an asset", "barca get up"))
    yield cli("run-without-target", ("run", "p.py"), ("needs a task",))
    yield cli("misspelt-flag", ("get", "up", "p.py", "--jsn"), ("No such option '--jsn'",))
    yield cli("misspelt-command", ("gte", "up", "p.py"), ("No such command 'gte'",))
    yield cli("refresh-unknown", ("get", "total", "p.py", "--refresh", "nope"),
              ("--refresh 'nope'",))
    yield cli("refresh-space-separated", ("get", "total", "p.py", "--refresh", "up", "per"),
              ("'per' is not a .py file",))
    yield cli("refresh-a-task", ("run", "pub", "p.py", "--refresh", "pub"),
              ("--refresh 'pub' is not an asset",))
    yield cli("refresh-outside-the-cone", ("get", "up", "p.py", "--refresh", "per"),
              ("--refresh 'per' is not an asset in this command's cone",))
    yield cli("refresh-empty", ("get", "up", "p.py", "--refresh", ""), ("--refresh is empty",))
    yield cli("refresh-empty-element", ("get", "total", "p.py", "--refresh", "per,"),
              ("--refresh '' is not an asset",))
    yield cli("no-cascade-alone", ("get", "up", "p.py", "--no-cascade"),
              ("--no-cascade only applies together with --refresh",))
    yield cli("partition-without-value", ("get", "per", "p.py", "--partition", "region"),
              ("is not DIM=VALUE",))
    yield cli("partition-empty-value", ("get", "per", "p.py", "--partition", "region="),
              ("is not DIM=VALUE",))
    yield cli("partition-unknown-dimension", ("get", "per", "p.py", "--partition", "zone=a"),
              ("dimension 'zone'",))
    yield cli("partition-unknown-key", ("get", "per", "p.py", "--partition", "region=zz"),
              ("region=zz matches no key",))
    yield cli("partition-on-unpartitioned", ("get", "up", "p.py", "--partition", "region=emea"),
              ("which no node in this command's cone has",))
    yield cli("partition-bad-json", ("get", "per", "p.py", "--partition", "{nope"),
              ("is not valid JSON",))
    yield cli("partition-json-list", ("get", "per", "p.py", "--partition", '["emea"]'),
              ("is not DIM=VALUE",))
    yield cli("partition-json-number", ("get", "per", "p.py", "--partition", "3"),
              ("is not DIM=VALUE",))
    yield cli("partition-json-nested", ("get", "per", "p.py", "--partition",
                                        '{"region": [["emea"]]}'), ("matches no key",))
    yield cli("partition-json-null", ("get", "per", "p.py", "--partition", '{"region": null}'),
              ("matches no key",))
    yield cli("partition-json-empty-dimension", ("get", "per", "p.py", "--partition",
                                                 '{"": ["emea"]}'), ("dimension ''",))
    yield cli("env-flag-path", ("get", "up", "p.py", "--env", "../x"),
              ("invalid environment name '../x'",))
    yield cli("env-flag-empty", ("get", "up", "p.py", "--env", ""),
              ("invalid environment name ''",))
    yield cli("history-unknown-run", ("history", "zzzz"), ("unknown run id 'zzzz'",))
    yield cli("history-negative-limit", ("history", "--limit", "-1"), ("--limit",))
    yield cli("logs-unknown-run", ("logs", "zzzz"), ("unknown run id 'zzzz'",))
    yield cli("docs-unknown-topic", ("docs", "nope"), ("unknown docs topic 'nope'",))
    yield cli("sql-unknown-view", ("sql", "select * from nope"), ("unknown view 'nope'",))
    yield cli("sql-write", ("sql", "create table t as select 1"), ("read-only",))
    yield cli("sql-empty", ("sql", ""), ("the query has no statement",))
    yield cli("sql-only-a-comment", ("sql", "/* nothing */;"), ("the query has no statement",))
    yield cli("stats-unknown-target", ("stats", "nope", "p.py"), ("unknown target 'nope'",))
    yield cli("status-unknown-target", ("status", "nope", "p.py"), ("unknown target 'nope'",))
    yield cli("plan-with-a-target", ("plan", "nope", "p.py"), ("'nope' is not a .py file",))
    yield cli("gc-unknown-flag", ("gc", "--bogus"), ("No such option '--bogus'",))
    for name, value, cause in [
        ("BARCA_POOL_SIZE", "0", "is not a positive integer"),
        ("BARCA_POOL_SIZE", "-1", "is not a positive integer"),
        ("BARCA_POOL_SIZE", "many", "is not a positive integer"),
        ("BARCA_POOL_SIZE", "2.5", "is not a positive integer"),
        ("BARCA_POOL_SIZE", " 2 ", "is not a positive integer"),
        ("BARCA_WARM_SECONDS", "-5", "is not a number of seconds"),
        ("BARCA_WARM_SECONDS", "soon", "is not a number of seconds"),
        ("BARCA_WARM_SECONDS", "nan", "is not a number of seconds"),
        ("BARCA_WARM_SECONDS", "inf", "is not a number of seconds"),
        ("BARCA_OUTPUT", "xml", "BARCA_OUTPUT='xml'"),
        ("BARCA_ENV", "a b", "invalid environment name 'a b'"),
        ("BARCA_ENV", "../up", "invalid environment name '../up'"),
    ]:
        yield cli(f"env/{name}={value.strip() or 'blank'}", ("get", "up", "p.py"),
                  (name if name != "BARCA_ENV" else "environment", cause), {name: value})


# -- values only a run can see (grouped: one `barca get` runs them all) ----------------------

def _values() -> Iterator[ValueCase]:
    def source(id: str, expr: str, *cause: str, head: str = "") -> ValueCase:
        return ValueCase(f"source/{id}", "source", f"return {expr}", cause, head=head)

    shape = "a partitions_from source must return a list or a dict"
    keys = "keys must be str or int"
    value = "is not JSON-writable"
    yield source("none", "None", shape, "NoneType")
    yield source("an-int", "5", shape, "not int")
    yield source("a-string", "'r1,r2'", shape, "not str")
    yield source("a-set", "{'r1', 'r2'}", shape, "not set")
    yield source("a-generator", "(k for k in ['r1'])", shape, "not generator")
    yield source("a-function", "lambda: ['r1']", shape, "not function")
    yield source("bool-tuple-of-a-function", "(True, lambda: 1)", shape, "not function")
    yield source("three-tuple", "(True, {'r1': 1}, 3)", keys, "key True is a bool")
    yield source("float-key", "{1.5: 'v'}", keys, "key 1.5 is a float")
    yield source("tuple-key", "{('r', 1): 'v'}", keys, "is a tuple")
    yield source("none-key", "{None: 'v'}", keys, "key None is a NoneType")
    yield source("bool-key", "{True: 'v'}", keys, "key True is a bool")
    yield source("bytes-key", "{b'r1': 'v'}", keys, "is a bytes")
    yield source("str-and-int-key", "{'1': 'a', 1: 'b'}", "key '1' appears twice")
    yield source("list-key-twice", "['r1', 'r2', 'r1']", "key 'r1' appears twice")
    yield source("list-str-and-int", "['1', 1]", "key '1' appears twice")
    yield source("list-of-lists", "[['r1']]", keys, "is a list")
    yield source("list-of-none", "['r1', None]", keys, "key None")
    yield source("list-of-floats", "[0.5]", keys, "key 0.5 is a float")
    yield source("list-of-dicts", "[{'r': 1}]", keys, "is a dict")
    yield source("surrogate-key", "{'\\ud800': 'v'}", "not valid Unicode text")
    yield source("surrogate-in-list", "['\\udfff']", "not valid Unicode text")
    # a NaN never equals itself: said as such (the key would rerun on every tick)
    yield source("nan-value", "{'r1': float('nan')}", "is NaN", "never equals itself", "'r1'")
    yield source("infinite-value", "{'r1': float('inf')}", "is Infinity", "finite number")
    yield source("object-value", "{'r1': object()}", value, "object")
    yield source("set-value", "{'r1': {1, 2}}", value, "set")
    yield source("bytes-value", "{'r1': b'v'}", value, "bytes")
    yield source("datetime-value", "{'r1': datetime.datetime(2026, 1, 1)}", value, "datetime",
                 head="import datetime")
    yield source("huge-int-value", "{'r1': 10 ** 400}", value)
    yield source("surrogate-value", "{'r1': '\\ud800'}", value)
    yield source("deep-value", "{'r1': functools.reduce(lambda v, _: [v], range(5000), [])}",
                 value, head="import functools")
    yield source("int-subclass-value", "{'r1': Count(3)}", value, "Count",
                 head="class Count(int):\n    pass")
    yield ValueCase("source/asset-returning-none", "asset-source", "return None",
                    (shape, "NoneType"))
    yield ValueCase("source/asset-returning-a-string", "asset-source", "return 'r1'",
                    (shape, "not str"))

    def result(id: str, kind: str, body: str, *cause: str, head: str = "",
               decorator: str = "") -> ValueCase:
        return ValueCase(f"{kind}/{id}", kind, body, cause, head, decorator)

    stored = "could not be stored"
    for kind in ("sensor", "asset"):
        yield result("lambda", kind, "return lambda row: row", stored, "function",
                     "return the data")
        yield result("generator", kind, "return (n for n in range(3))", stored, "generator",
                     "list(")
        yield result("open-file", kind, "return open(__file__)", stored, "TextIOWrapper",
                     "contents")
        yield result("nested-too-deep", kind,
                     "return functools.reduce(lambda v, _: [v], range(100_000), [])",
                     "nested too deeply", head="import functools")
    yield result("generator-function", "asset", "yield 1", stored, "generator")
    yield result("returns-a-coroutine", "asset", "return later()", stored, "coroutine",
                 "await it", head="async def later():\n    return 1")
    yield result("lambda-inside-a-dict", "asset", "return {'f': [1, lambda: 1]}", stored,
                 "function at ['f'][1]")
    yield result("own-pickling-raises", "asset", "return Handle()", "Handle",
                 "ValueError: handles cannot travel",
                 head="class Handle:\n    def __reduce__(self):\n"
                      "        raise ValueError('handles cannot travel')")
    yield result("json-serializer-given-a-set", "asset", "return {1, 2}",
                 'serializer="json" cannot store a set', decorator='serializer="json"')
    yield result("json-serializer-given-nan", "asset", "return float('nan')",
                 'serializer="json" cannot store a float', decorator='serializer="json"')
    yield result("dataframe-mixed-column", "asset", "return pd.DataFrame({'a': [1, 'x']})",
                 "pandas DataFrame could not be written as parquet", 'serializer="pickle"',
                 head="import pandas as pd")
    yield result("file-calls-sys-exit", "asset", "return 1", "sys.exit(4)",
                 head="import sys\nsys.exit(4)")
    yield result("file-raises-at-import", "asset", "return 1", "ValueError: importing",
                 "failed: at import", head="raise ValueError('at import')")
    yield ValueCase("asset/file-named-like-a-loaded-module", "asset", "return 1",
                    ("would be imported as module 'json'", "rename json.py"), file="lib/json.py")
    yield ValueCase("asset/dot-in-the-file-name", "asset", "return 1",
                    ("the '.' in its name reads as a package", "p_q.py"), file="p.q.py")


# Keys that look like paths or are empty: valid keys, escaped into directory names.
CONFINED_KEYS = {"parent-dirs": "../../escape", "absolute": "/tmp/escape", "dot-dot": "..",
                 "dot": ".", "empty": "", "nul": "a\x00b", "slash-inside": "a/b",
                 "backslashes": "..\\..\\x", "long": "k" * 300, "huge": "h" * 100_000,
                 "percent-escape": "%2E%2E", "tilde": "~", "newline": "a\nb"}


VALUE_CASES: tuple[ValueCase, ...] = tuple(_values())
CONFINED: tuple[ValueCase, ...] = tuple(
    ValueCase(f"confined/{id}", "source", f"return {{{key!r}: 'v'}}", ())
    for id, key in CONFINED_KEYS.items())


# -- mutations of one valid pipeline ---------------------------------------------------------

@dataclass(frozen=True)
class Node:
    """One node of the valid pipeline, its decorator arguments kept as source text so that a
    mutation can replace one of them."""

    kind: str
    function: str
    args: tuple[tuple[str, str], ...]  # decorator argument -> source text, in order
    signature: str
    body: str

    def render(self, args: Mapping[str, str] | None = None, spelling: str = "") -> str:
        """The node's source, with `args` instead of its own when given."""
        args = dict(self.args) if args is None else args
        written = ", ".join(f"{k}={v}" for k, v in args.items())
        return (f"@{spelling}{self.kind}({written})\ndef {self.function}{self.signature}:\n"
                f"    {self.body}\n")


VALID_HEAD = ("from barca import (Always, Manual, Schedule, asset, asset_ref, batches, "
              "collect,\n                   partitions, partitions_from, sensor, task)\n"
              "import barca\n\nRETRIES = 2\nFORMATS = ['json']\nENV_NAMES = ['REGION']\n"
              "CRON = '0 * * * *'\n\n\ndef mk():\n    return {}\n\n\ndef pick():\n"
              "    return 'json'\n")
VALID_NODES = (
    Node("sensor", "versions", (("freshness", 'Schedule("*/5 * * * *")'),
                                ("timeout_seconds", "30")),
         "() -> dict", 'return {"r1": "v1", "r2": "v2"}'),
    Node("asset", "orders", (("partitions", '{"retailer": partitions_from(versions)}'),
                             ("retries", "2"), ("retry_backoff", "0.5"),
                             ("timeout_seconds", "60"), ("env", '["REGION"]')),
         "(retailer: str, versions: str = '') -> dict",
         'return {"retailer": retailer, "version": versions}'),
    Node("asset", "regional", (("partitions", '{"region": partitions(["emea", "amer"])}'),
                               ("batch", "2"), ("weight", "2")),
         "(region, **extra) -> dict", 'return {"region": region}'),
    Node("asset", "summarize", (("name", '"summary"'), ("inputs", '{"rows": collect(orders)}'),
                                ("serializer", '"json"'), ("cutoff", "True"),
                                ("tags", '{"team": "data"}'),
                                ("description", '"every retailer"')),
         "(rows: list) -> dict", 'return {"n": len(rows)}'),
    Node("task", "publish", (("inputs", '{"summary": summarize}'),
                             ("freshness", 'Schedule("0 6 * * *")')),
         "(summary: dict) -> None", 'print(summary["n"])'),
)


def valid_pipeline(nodes: tuple[Node, ...] = VALID_NODES,
                   changed: Mapping[str, Mapping[str, str]] | None = None,
                   spelling: str = "") -> str:
    """The valid pipeline, with the arguments of some nodes (by function) replaced."""
    parts = [VALID_HEAD]
    for node in nodes:
        parts.append(node.render((changed or {}).get(node.function), spelling))
    return "\n\n".join(parts)


def _accepts(node: Node, arg: str) -> bool:
    return arg in barca.api.DECORATOR_ARGS[node.kind]


# Bad values of one argument: (source text, the words the error must hold). None of them is
# None: `arg=None` means the argument is absent, which is valid.
SETTINGS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "retries": [(v, ("retries=",)) for v in
                ("0", "1.5", "'3'", "True", "10001", "9" * 400, "RETRIES + 1")],
    "timeout_seconds": [(v, ("timeout_seconds=",)) for v in
                        ("-1", "'30'", "1e999", "1" + "0" * 400, "float('inf')")],
    "retry_backoff": [(v, ("retry_backoff=",)) for v in ("-0.5", "'1'", "1e999", "86401")],
    "weight": [(v, ("weight=",)) for v in ("0", "2.5", "'1'", "False")],
    "name": [(v, ("name=", "identifier")) for v in
             ("''", "'a-b'", "'1st'", "'x/../y'", "'a\\x00b'", "3", "NAME")]
    + [("'versions'", ("node id", "is already used"))],
    "serializer": [(v, ("serializer=",)) for v in
                   ("'yaml'", "1", "'JSON'", "pick()", "FORMATS[0]")],
    "freshness": [(v, ("freshness=",)) for v in ("'manual'", "Manual()", "always")]
    + [(f"Schedule({v!r})", ("is not a cron expression",)) for v in
       ("every hour", "99 * * * *", "* * * * * * *", "", "61 0 0 * * *")]
    + [("Schedule()", ("Schedule() takes exactly one positional argument",)),
       ("Schedule('0 * * * *', 'UTC')", ("Schedule() takes exactly one positional argument",)),
       ("Schedule(CRON)", ("needs a literal cron string",)),
       ("Schedule('0 * * * *', batch=-1)", ("batch=",))],
    "env": [(v, ("env=",)) for v in
            ("'REGION'", "['']", "['A=B']", "[1]", "ENV_NAMES", "['A\\x00']")],
    "tags": [(v, ("tags=",)) for v in ("['a']", "{'a': 1}", "{1: 'a'}")],
    "description": [(v, ("description=",)) for v in ("3", "['x']")],
    "cutoff": [(v, ("cutoff=",)) for v in ("'yes'", "1")],
    "batch": [(v, ("batch=",)) for v in ("0", "'some'", "2.5", "True")]
    + [("batches([[]])", ("non-empty lists",)),
       ("batches([['emea'], ['emea']])", ("in two groups",))],
}
SENSOR_ONLY: dict[str, list[tuple[str, tuple[str, ...]]]] = {}  # Always is accepted (as 0.33)
MISSPELT = [("retries", "retires", "Did you mean retries?"),
            ("timeout_seconds", "timeout_second", "Did you mean timeout_seconds?"),
            ("inputs", "input", "Did you mean inputs?"),
            ("partitions", "partition", "Did you mean partitions?"),
            ("serializer", "serialiser", "Did you mean serializer?"),
            ("freshness", "fresh", "has no argument 'fresh'"),
            ("description", "desc", "has no argument 'desc'")]
# Per node: inputs= and partitions= broken in ways that depend on what the node reads.
STRUCTURE: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    "summarize": [
        ("inputs", "[orders]", ("inputs=", "dict literal")),
        ("inputs", "mk()", ("inputs=", "dict literal")),
        ("inputs", '{"rows": nope}', ("input 'nope'", "names no @asset/@sensor/@task")),
        ("inputs", '{"nope": collect(orders)}', ("inputs= key 'nope' is not a parameter",)),
        ("inputs", '{1: collect(orders)}', ("inputs= keys must be parameter names",)),
        ("inputs", '{"rows": "orders"}', ("input 'rows' must name a node",)),
        ("inputs", '{"rows": collect(orders), "rows": collect(orders)}',
         ("names parameter 'rows' twice",)),
        ("inputs", '{"rows": orders}', ("does not read it key by key", "collect(orders)")),
        ("inputs", '{"rows": collect(versions)}', ("needs a partitioned upstream",)),
        ("inputs", '{"rows": collect(publish)}', ("cannot be an input to asset",)),
        ("inputs", '{"rows": asset_ref("p.py:nope")}', ("names no @asset/@sensor/@task",)),
        ("inputs", '{"rows": collect(orders, orders)}', ("takes exactly one positional",)),
    ],
    "publish": [
        ("inputs", '{"summary": publish}', ("cycle in the pipeline",)),
        ("inputs", '{"summary": summarize.rows}', ("names no @asset/@sensor/@task",)),
        ("inputs", '{"summary": summarize, "extra": summarize}',
         ("inputs= key 'extra' is not a parameter",)),
    ],
    "orders": [
        ("partitions", '["r1"]', ("partitions= must be a dict literal",)),
        ("partitions", '{"retailer": None}', ("must be partitions(...) or partitions_from",)),
        ("partitions", '{1: partitions_from(versions)}', ("dimension names",)),
        ("partitions", '{"retailer-id": partitions_from(versions)}', ("dimension names",)),
        ("partitions", '{"retailer": partitions_from(nope)}', ("names no @asset",)),
        ("partitions", '{"retailer": partitions_from(publish)}', ("names a task",)),
        ("partitions", '{"retailer": partitions_from(versions, versions)}',
         ("takes exactly one positional",)),
        ("partitions", '{"retailer": partitions_from(versions), "retailer": '
                       'partitions(["a"])}', ("declares dimension 'retailer' twice",)),
        ("partitions", '{"shop": partitions_from(versions)}',
         ("partition dimension 'shop' is not a parameter",)),
        ("partitions", '{"retailer": partitions_from(orders)}', ("cycle in the pipeline",)),
        ("partitions", '{"retailer": partitions_from(regional)}',
         ("declared under dimension 'retailer'",)),
    ],
    "regional": [
        ("partitions", '{"region": partitions(["emea", "emea"])}', ("appears twice",)),
        ("partitions", '{"region": partitions(values=["emea"])}',
         ("takes exactly one positional",)),
        ("partitions", '{"region": collect(orders)}', ("must be partitions(...)",)),
        ("partitions", '{"region": partitions(["emea"]), "day": partitions_from(versions)}',
         ("must be the only dimension",)),
        ("partitions", "{}", ("has no partitions",)),  # batch=2 is left without keys
    ],
}


def mutations() -> Iterator[tuple[str, str, dict[str, str], tuple[str, ...]]]:
    """Every single mutation: (id, function, its new decorator arguments, cause)."""
    nodes = {n.function: n for n in VALID_NODES}
    settings = [(arg, bad, cause) for arg, values in SETTINGS.items() for bad, cause in values]
    for i, (arg, bad, cause) in enumerate(settings):
        fits = [n for n in VALID_NODES if _accepts(n, arg)
                and not (arg == "name" and n.function == "versions")  # its own name is fine
                and not (arg == "batch" and n.function != "regional")]  # needs partitions
        node = fits[i % len(fits)]  # each value on one node, the nodes taken in turn
        # the error names the node, except a name taken twice: then the later one in the file
        named = () if "is already used" in cause else (f"p.py:{node.function}",)
        yield (f"mutate/{node.function}/{arg}={bad}", node.function,
               {**dict(node.args), arg: bad}, (*cause, *named))
    for arg, values in SENSOR_ONLY.items():
        for bad, cause in values:
            yield (f"mutate/versions/{arg}={bad}", "versions",
                   {**dict(nodes["versions"].args), arg: bad}, cause)
    for arg, wrong, cause in MISSPELT:
        node = next(n for n in VALID_NODES if arg in dict(n.args))
        args = {(wrong if k == arg else k): v for k, v in node.args}
        yield f"mutate/{node.function}/{arg}->{wrong}", node.function, args, (cause,)
    for function, changes in STRUCTURE.items():
        for arg, bad, cause in changes:
            yield (f"mutate/{function}/{arg}={bad}", function,
                   {**dict(nodes[function].args), arg: bad}, cause)
    yield ("mutate/summarize/batch=2", "summarize",
           {**dict(nodes["summarize"].args), "batch": "2"}, ("has no partitions",))
    yield ("mutate/versions/cutoff=True", "versions",
           {**dict(nodes["versions"].args), "cutoff": "True"},
           ("@sensor has no argument 'cutoff'",))
    yield ("mutate/versions/inputs", "versions",
           {**dict(nodes["versions"].args), "inputs": '{"x": orders}'},
           ("cannot have inputs",))


def mutation_cases() -> list[Case]:
    """Each mutation once, on the valid pipeline as written, checked by `barca list`."""
    return [Case(id, {"p.py": valid_pipeline(changed={function: args})}, ("list", "p.py"),
                 cause) for id, function, args, cause in mutations()]


# -- the soak's generator --------------------------------------------------------------------

SPELLINGS = ("", "barca.")  # `@asset(...)` or `@barca.asset(...)`


def make_cases(n: int, seed: int) -> list[Case]:
    """`n` cases drawn at random (reproducibly from `seed`): mutations of the valid pipeline
    on varied carriers (decorator spelling, node order, file location, padding), hand-written
    cases, and malformed key-source values made up from their parts."""
    rng = random.Random(seed)
    pool = list(mutations())
    fixed = hand_written_cases()
    out = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.6:
            out.append(_carried(rng, i, *rng.choice(pool)))
        elif roll < 0.8:
            out.append(_random_value(rng, i).as_case())
        else:
            case = rng.choice(fixed)
            out.append(replace(case, id=f"{case.id}#{i}"))
    return out


def _carried(rng: random.Random, i: int, id: str, function: str, args: dict[str, str],
             cause: tuple[str, ...]) -> Case:
    nodes = list(VALID_NODES)
    rng.shuffle(nodes)  # discovery reads decorators from the text: order does not matter
    folder = rng.choice(("", "pipelines/", "deep/er/"))
    file = f"{folder}p{rng.randrange(1000)}.py"
    padding = "\n".join(f"# {rng.random()}" for _ in range(rng.randrange(4)))
    text = padding + "\n" + valid_pipeline(tuple(nodes), {function: args},
                                           rng.choice(SPELLINGS))
    cause = tuple(c.replace("p.py:", f"{file}:") for c in cause)
    return Case(f"{id}#{i}", {file: text}, ("list", file), cause)


_BAD_KEYS = [("1.5", "key 1.5 is a float"), ("None", "key None is a NoneType"),
             ("True", "key True is a bool"), ("(1, 2)", "is a tuple"), ("b'k'", "is a bytes"),
             ("frozenset()", "is a frozenset"), ("'\\ud800'", "not valid Unicode text")]
_BAD_VALUES = ["float('nan')", "float('inf')", "{1, 2}", "b'v'", "object()", "10 ** 400",
               "'\\udc80'", "[float('-inf')]", "{'a': {1}}", "range(3)"]
_BAD_SHAPES = ["None", "5", "'keys'", "{'a', 'b'}", "(k for k in 'ab')", "lambda: 1", "3.5"]


def _random_value(rng: random.Random, i: int) -> ValueCase:
    good = sorted({"".join(rng.choice("abcdefghij0123456789_-./") for _ in range(
        rng.randrange(1, 12))) for _ in range(rng.randrange(0, 6))})
    entries = [f"{k!r}: {rng.randrange(100)!r}" for k in good]
    kind = rng.randrange(4)
    if kind == 0:
        bad, cause = rng.choice(_BAD_KEYS)
        entries.insert(rng.randrange(len(entries) + 1), f"{bad}: 'v'")
        return ValueCase(f"source/random-key-{i}", "source", f"return {{{', '.join(entries)}}}",
                         (cause,))
    if kind == 1:
        bad = rng.choice(_BAD_VALUES)
        entries.insert(rng.randrange(len(entries) + 1), f"'zz{i}': {bad}")
        return ValueCase(f"source/random-value-{i}", "source",
                         f"return {{{', '.join(entries)}}}", ("is not JSON-writable",))
    if kind == 2:
        base = good or ["k"]
        twice = rng.choice(base)
        items = [*map(repr, base), repr(twice)]
        rng.shuffle(items)
        return ValueCase(f"source/random-list-{i}", "source", f"return [{', '.join(items)}]",
                         (f"key {twice!r} appears twice",))
    return ValueCase(f"source/random-shape-{i}", "source", f"return {rng.choice(_BAD_SHAPES)}",
                     ("a partitions_from source must return a list or a dict",))


def hand_written_cases() -> list[Case]:
    """Every hand-written command case, by the way in it takes."""
    return [*_decorator_cases(), *_graph_cases(), *_file_cases(), *_key_cases(),
            *_cli_cases()]


# -- HTTP requests to a real `barca serve` (issue 26) ------------------------------------------

HTTP_PIPELINE = """
from barca import asset, partitions, task


def called(name):
    with open("calls.log", "a") as f:
        f.write(name + "\\n")


@asset()
def source() -> int:
    called("source")
    return 1


@asset(inputs={"source": source})
def summary(source: int) -> int:
    called("summary")
    return source + 1


@asset(partitions={"region": partitions(["emea", "amer"])})
def per(region: str) -> str:
    called("per " + region)
    return region


@task(inputs={"summary": summary})
def publish(summary: int) -> None:
    called("publish")
"""
HTTP_SEED = ("get", "summary", "p.py")  # the one run recorded before the server starts
MAX_ANSWER_BYTES = 10_000  # a refusal names what is wrong; it never echoes the input whole

Header = tuple[str, "str | bytes"]


@dataclass(frozen=True)
class HttpCase:
    """One request, alone on a fresh connection, to a `barca serve` of HTTP_PIPELINE that has
    HTTP_SEED recorded, and what it must get: a status in `expect` (any 4xx when empty) with a
    JSON error envelope holding every word of `cause`, at most MAX_ANSWER_BYTES; or, for
    `protocol` garbage (below what a route sees), a 4xx of any body or a closed connection.
    Never a 5xx, a traceback or a hang, and no run started (every request that would run
    something asks for `publish`, which writes calls.log).

    `target` and header values may hold {run} (the recorded run's id) and {port}. The request
    gets `Host: 127.0.0.1:{port}` unless it names a Host, a Content-Length for its body unless
    it frames the body itself, and `Connection: close`; `raw`, when set, is sent as it is.
    `then_eof`: the client half-closes its side once the request is sent."""

    id: str
    method: str = "GET"
    target: str = "/runs"
    headers: tuple[Header, ...] = ()
    body: bytes = b""
    expect: tuple[int, ...] = ()
    cause: tuple[str, ...] = ()
    raw: bytes | None = None
    protocol: bool = False
    then_eof: bool = False

    def request(self, port: int, run_id: str) -> bytes:
        if self.raw is not None:
            return self.raw
        fill = {"{run}": run_id, "{port}": str(port)}

        def filled(text: str | bytes) -> bytes:
            data = text.encode("latin-1") if isinstance(text, str) else text
            for mark, value in fill.items():
                data = data.replace(mark.encode(), value.encode())
            return data
        names = {name.lower() for name, _ in self.headers}
        head = [f"{self.method} ".encode() + filled(self.target) + b" HTTP/1.1"]
        if "host" not in names:
            head.append(f"Host: 127.0.0.1:{port}".encode())
        head += [name.encode() + b": " + filled(value) for name, value in self.headers]
        if self.body and not names & {"content-length", "transfer-encoding"}:
            head.append(b"Content-Length: %d" % len(self.body))
        head.append(b"Connection: close")
        return b"\r\n".join(head) + b"\r\n\r\n" + self.body


def parse_reply(data: bytes) -> tuple[int | None, dict[str, str], bytes]:
    """The first answer in what the server sent: (status, headers by lower-case name, body);
    status None when it sent no status line."""
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    match = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    if not match:
        return None, {}, b""
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), value.strip())
    if "content-length" in headers:
        return int(match.group(1)), headers, rest[:int(headers["content-length"])]
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            length = int(size.split(b";")[0] or b"0", 16)
            if length == 0:
                break
            body, rest = body + rest[:length], rest[length + 2:]
        return int(match.group(1)), headers, body
    return int(match.group(1)), headers, rest


def http_problems(case: HttpCase, data: bytes, hung: bool) -> list[str]:
    """What is wrong with the server's answer `data` to `case` (`hung`: the connection was
    still open, with no answer or no end, when the client gave up): nothing, for a good one."""
    if hung:
        return [f"no end within the client's wait ({len(data)} bytes: {data[:200]!r})"]
    status, headers, body = parse_reply(data)
    if b"Traceback" in data:
        return ["a traceback in the answer"]
    if status is None:
        return [] if case.protocol and not data else [f"no status line: {data[:200]!r}"]
    wanted = case.expect or tuple(range(400, 500))
    if status not in wanted:
        return [f"status {status}, expected {'4xx' if not case.expect else case.expect}: "
                f"{body[:300]!r}"]
    if case.protocol or status < 400:
        return []
    out = []
    if len(body) > MAX_ANSWER_BYTES:
        out.append(f"an answer of {len(body):,} bytes (the input echoed?)")
    try:
        envelope = json.loads(body)
    except ValueError:
        return out + [f"not a JSON error: {headers.get('content-type')} {body[:200]!r}"]
    if not isinstance(envelope, dict) or not envelope.get("error") or \
            "remediation" not in envelope:
        return out + [f"not an error envelope: {body[:200]!r}"]
    message = f"{envelope['error']}\n{envelope['remediation']}"
    missing = [word for word in case.cause if word not in message]
    if missing:
        out.append(f"the error does not name {missing}: {message[:300]}")
    return out


JSON_TYPE: tuple[Header, ...] = (("Content-Type", "application/json"),)
RUN = b'{"command": "run", "targets": ["publish"]}'  # runs a step, if anything lets it


def _post(id: str, body: bytes, expect: int, *cause: str, headers: tuple[Header, ...] = JSON_TYPE,
          target: str = "/runs") -> HttpCase:
    return HttpCase(id, "POST", target, headers, body, (expect,), cause)


def _body_http_cases() -> Iterator[HttpCase]:
    """Bodies of POST /runs that are not JSON, or not a RunRequest."""
    not_json = ("the request body is not JSON",)
    yield _post("body/not-json", b'{"targets": [', 400, *not_json)
    yield _post("body/second-document", RUN + b' {"x": 1}', 400, *not_json)
    yield _post("body/byte-order-mark", b"\xef\xbb\xbf" + RUN, 400, *not_json)
    yield _post("body/invalid-utf8", b'{"targets": ["\xff\xfe"]}', 400, *not_json)
    yield _post("body/lone-surrogate", b'{"targets": ["\\ud800"]}', 400, *not_json)
    yield _post("body/nan", RUN[:-1] + b', "dry_run": NaN}', 400, *not_json)
    yield _post("body/5000-digit-number", RUN[:-1] + b', "dry_run": ' + b"9" * 5000 + b"}",
                400, *not_json)
    yield _post("body/deep-array", b"[" * 100_000, 400, *not_json)
    yield _post("body/deep-targets", b'{"targets": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400,
                *not_json)
    yield _post("body/deep-partition", b'{"command": "run", "targets": ["publish"], '
                b'"partition": {"region": ' + b"[" * 900 + b'"emea"' + b"]" * 900 + b"}}",
                400, "'partition' is nested too deeply")
    shape = ("must be a JSON object",)
    yield _post("body/array", b'["publish"]', 400, *shape)
    yield _post("body/string", b'"publish"', 400, *shape)
    yield _post("body/null", b"null", 400, *shape)
    yield _post("body/targets-a-string", b'{"command": "run", "targets": "publish"}', 400,
                "'targets' has the wrong type")
    yield _post("body/targets-numbers", b'{"command": "run", "targets": [1, 2]}', 400,
                "'targets' has the wrong type")
    yield _post("body/targets-nested", b'{"command": "run", "targets": [["publish"]]}', 400,
                "'targets' has the wrong type")
    yield _post("body/flag-a-string", RUN[:-1] + b', "refresh_all": "yes"}', 400,
                "'refresh_all' has the wrong type")
    yield _post("body/flag-a-number", RUN[:-1] + b', "cascade": 0}', 400,
                "'cascade' has the wrong type")
    yield _post("body/unknown-field", RUN[:-1] + b', "argv": ["--run-id", "x"]}', 400,
                "unknown field 'argv'")
    yield _post("body/scheduler-command", b'{"command": "serve", "targets": ["publish"]}',
                400, "is not get or run")
    yield _post("body/output-html", RUN[:-1] + b', "output": "html"}', 400,
                "is not one of json, pretty, value, path")
    yield _post("body/file-not-served", RUN[:-1] + b', "files": ["../../etc/passwd"]}', 400,
                "is not served here")
    yield _post("body/nul-in-target", b'{"command": "run", "targets": ["pub\\u0000lish"]}',
                400, "'targets' holds a NUL character")
    yield _post("body/nul-in-batch", RUN[:-1] + b', "batch": ["publish=\\u00002"]}', 400,
                "'batch' holds a NUL character")
    yield _post("body/nul-in-partition",
                b'{"command": "run", "targets": ["per"], "partition": ["region=em\\u0000ea"]}',
                400, "'partition' holds a NUL character")
    # framing: a body shorter or longer than its Content-Length, chunked sizes that lie
    yield HttpCase("body/shorter-than-its-length", "POST", "/runs",
                   (*JSON_TYPE, ("Content-Length", "100")), b'{"tar', (408,),
                   ("did not arrive",))
    yield HttpCase("body/shorter-than-its-length-then-eof", "POST", "/runs",
                   (*JSON_TYPE, ("Content-Length", "100")), b'{"tar', protocol=True,
                   then_eof=True)
    yield HttpCase("body/longer-than-its-length", "POST", "/runs",
                   (*JSON_TYPE, ("Content-Length", "10")), RUN + b"GARBAGE\r\n\r\n", (400,),
                   not_json)
    chunked = (*JSON_TYPE, ("Transfer-Encoding", "chunked"))
    yield HttpCase("chunked/size-over-the-data", "POST", "/runs", chunked,
                   b"40\r\n" + RUN + b"\r\n0\r\n\r\n", (408,), ("did not arrive",))
    yield HttpCase("chunked/size-under-the-data", "POST", "/runs", chunked,
                   b"1\r\n" + RUN + b"\r\n0\r\n\r\n", protocol=True)
    yield HttpCase("chunked/size-not-hex", "POST", "/runs", chunked,
                   b"zz\r\n" + RUN + b"\r\n0\r\n\r\n", protocol=True)
    yield HttpCase("chunked/size-negative", "POST", "/runs", chunked,
                   b"-2a\r\n" + RUN + b"\r\n0\r\n\r\n", protocol=True)
    yield HttpCase("chunked/size-20-hex-digits", "POST", "/runs", chunked,
                   b"FFFFFFFFFFFFFFFFFFFF\r\n" + RUN + b"\r\n0\r\n\r\n", protocol=True)
    yield HttpCase("chunked/no-last-chunk-then-eof", "POST", "/runs", chunked,
                   b"%x\r\n" % len(RUN) + RUN + b"\r\n", protocol=True, then_eof=True)
    yield HttpCase("chunked/and-a-content-length", "POST", "/runs",
                   (*chunked, ("Content-Length", "2")), b"%x\r\n" % len(RUN) + RUN
                   + b"\r\n0\r\n\r\n", (400,), ("both Content-Length and Transfer-Encoding",))
    yield HttpCase("chunked/transfer-encoding-gzip", "POST", "/runs",
                   (*JSON_TYPE, ("Transfer-Encoding", "gzip")), RUN, protocol=True)
    yield HttpCase("chunked/over-the-cap", "POST", "/runs", chunked,
                   (b"100000\r\n" + b"[" * 0x100000 + b"\r\n") * 2 + b"0\r\n\r\n", (413,),
                   ("over 1024 KiB",))
    for length in ("-1", "0x10", "1e3", "2, 3"):
        yield HttpCase(f"content-length/{length}", "POST", "/runs",
                       (*JSON_TYPE, ("Content-Length", length)), RUN, protocol=True)
    yield HttpCase("content-length/20-digits", "POST", "/runs",
                   (*JSON_TYPE, ("Content-Length", "9" * 20)), RUN, (413,), ("over 1024 KiB",))
    yield HttpCase("content-length/64-MB-expecting-100-continue", "POST", "/runs",
                   (*JSON_TYPE, ("Content-Length", str(64 << 20)), ("Expect", "100-continue")),
                   b"", (413,), ("over 1024 KiB",))


def _header_http_cases() -> Iterator[HttpCase]:
    """Hosts, origins, content types and headers a browser page, a proxy or a script sends."""
    host = ("does not answer to the host name",)
    for name in ("evil.example", "evil.example:{port}", "127.0.0.1.nip.io", "localhost.",
                 "127.0.0.1@evil.example", "[::2]"):
        yield HttpCase(f"host/{name}", "GET", "/state", (("Host", name),), expect=(421,),
                       cause=host)
    yield HttpCase("host/other-name-on-a-run", "POST", "/runs",
                   (("Host", "evil.example"), *JSON_TYPE), RUN, (421,), host)
    yield HttpCase("host/none-http-1.0", raw=b"POST /run/publish HTTP/1.0\r\n\r\n",
                   expect=(421,), cause=host)
    yield HttpCase("host/empty", headers=(("Host", ""),), protocol=True)
    yield HttpCase("host/twice", headers=(("Host", "127.0.0.1"), ("Host", "evil.example")),
                   protocol=True)
    yield HttpCase("host/100-KB", headers=(("Host", "h" * 100_000),), protocol=True)
    yield HttpCase("host/latin-1", headers=(("Host", b"\xe9vil.example"),), protocol=True)
    yield HttpCase("host/connect-method",
                   raw=b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
                   protocol=True)
    page = ("cannot start or change anything here",)
    # 12,000 bytes: past MAX_ANSWER_BYTES (an echo shows), within the 16 KB that h11 buffers
    # of a head still incomplete, so that the origin check always sees it
    for origin in ("null", "http://evil.example", "http://127.0.0.1.evil.example",
                   "http://127.0.0.1@evil.example", "file://", "chrome-extension://abc",
                   "http://" + "o" * 12_000):
        yield _post(f"origin/{origin[:40]}", RUN, 403, *page,
                    headers=(*JSON_TYPE, ("Origin", origin)))
    # 100 KB: refused by h11 (400) when the head comes in pieces past its 16 KB, by the
    # origin check (403) when it comes whole; which one depends on how the bytes arrive
    yield HttpCase("origin/100-KB", "POST", "/runs",
                   (*JSON_TYPE, ("Origin", "http://" + "o" * 100_000)), RUN,
                   expect=(400, 403), protocol=True)
    yield _post("origin/foreign-then-this-server", RUN, 403, *page, headers=(
        *JSON_TYPE, ("Origin", "http://evil.example"), ("Origin", "http://127.0.0.1:{port}")))
    yield _post("origin/null-on-the-legacy-trigger", b"", 403, *page, target="/run/publish",
                headers=(("Origin", "null"),))
    yield HttpCase("origin/foreign-cancel", "DELETE", "/runs/{run}",
                   (("Origin", "http://evil.example"),), expect=(403,), cause=page)
    yield _post("sec-fetch-site/cross-site", RUN, 403, *page,
                headers=(*JSON_TYPE, ("Sec-Fetch-Site", "Cross-Site")))
    json_only = ("takes a JSON body",)
    for kind in ("text/plain", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=application/json", "application/jsonp",
                 "application/json-patch+json", "text/json", "application/json, text/plain"):
        yield _post(f"content-type/{kind[:40]}", RUN, 415, *json_only,
                    headers=(("Content-Type", kind),))
    # past h11's 16 KB bound on a header block still arriving: refused by the HTTP layer (400)
    # when it comes in pieces, by the route (415) when it comes whole, by timing alone
    yield HttpCase("size/content-type-of-100-KB", "POST", "/runs",
                   (("Content-Type", "application/json" + "x" * 100_000),), RUN,
                   expect=(400, 415), protocol=True)
    yield _post("content-type/none", RUN, 415, *json_only, headers=())
    yield _post("content-type/text-plain-then-json", RUN, 415, *json_only,
                headers=(("Content-Type", "text/plain"), *JSON_TYPE))
    yield _post("content-type/form-without-fields", b"", 415, *json_only, target="/run/publish",
                headers=(("Content-Type", "application/x-www-form-urlencoded"),
                         ("Content-Length", "0")))
    yield _post("content-type/charset-utf-16", '{"targets": ["publish"]}'.encode("utf-16"), 400,
                "the request body is not JSON",
                headers=(("Content-Type", "application/json; charset=utf-16"),))
    yield _post("content-type/odd-parameters", b'{"targets": ["nope"]}', 404, "unknown target",
                headers=(("Content-Type", 'APPLICATION/JSON ;;; =; charset="x'),))
    yield HttpCase("content-type/nul", "POST", "/runs",
                   (("Content-Type", b"application/json\x00"),), RUN, protocol=True)
    not_number = ("is not a whole number",)
    yield HttpCase("headers/2000-of-them", "GET", "/runs?limit=x",
                   tuple((f"X-Pad-{i}", "a") for i in range(2000)), expect=(400,),
                   cause=not_number)
    yield HttpCase("headers/200-of-8-KB", "GET", "/runs?limit=x",
                   (("X-Pad", "a" * 8000),) * 200, protocol=True)
    yield HttpCase("headers/folded-line", raw=b"GET /runs?limit=x HTTP/1.1\r\nHost: 127.0.0.1"
                   b"\r\nX-A: a\r\n  b\r\nConnection: close\r\n\r\n", protocol=True)
    yield HttpCase("headers/space-before-colon", raw=b"GET /runs HTTP/1.1\r\nHost : "
                   b"evil.example\r\nConnection: close\r\n\r\n", protocol=True)
    yield HttpCase("headers/latin-1-name", headers=(("X-\xe9", "a"),), protocol=True)
    for value in (b"\xff\xfe", "²".encode(), b"9" * 5000, b"-3"):
        yield HttpCase(f"last-event-id/{value[:8]!r}", "GET", "/runs/{run}/events",
                       (("Last-Event-ID", value),), expect=(200,))
    yield HttpCase("last-event-id/unknown-run", "GET", "/runs/nope/events",
                   (("Last-Event-ID", b"\xff"),), expect=(404,), cause=("no run 'nope'",))


def _size_http_cases() -> Iterator[HttpCase]:
    """Inputs far over any real one: names, lists, query strings, numbers."""
    def targets(*names: str) -> bytes:
        return json.dumps({"command": "run", "targets": list(names)}).encode()
    yield _post("size/target-of-4096", targets("publish" + "h" * 4089), 400,
                "node names are at most 512 characters")
    yield _post("size/target-of-4097", targets("p" * 4097), 400, "over 4096 characters")
    yield _post("size/target-of-900-KB", targets("publish" * 130_000), 400,
                "over 4096 characters")
    yield _post("size/5000-targets", targets(*["publish"] * 5000), 400,
                "'targets' has 5000 items")
    yield _post("size/256-refresh-of-4000", json.dumps(
        {"command": "run", "targets": ["publish"], "refresh": ["r" * 4000] * 256}).encode(),
        400, "'refresh' is", "KiB a field")
    yield _post("size/partition-key-of-200-KB", json.dumps(
        {"targets": ["per"], "partition": {"r" * 200_000: ["emea"]}}).encode(), 400,
        "'partition' is", "KiB a field")
    yield _post("size/files-256-of-4000", json.dumps(
        {"command": "run", "targets": ["publish"], "files": ["f" * 4000] * 256}).encode(),
        400, "'files' is", "KiB a field")
    yield _post("size/field-name-of-500-KB", b'{"' + b"k" * 500_000 + b'": 1}', 400,
                "unknown field")
    yield _post("size/command-of-4096", json.dumps({"command": "c" * 4096}).encode(), 400,
                "is not get or run")
    yield HttpCase("size/legacy-target-of-8000", "POST", "/run/" + "p" * 8000, expect=(400,),
                   cause=("node names are at most 512 characters",))
    long_path = ("path and query are",)
    yield HttpCase("size/path-of-9000", "GET", "/runs/" + "a" * 9000, expect=(414,),
                   cause=long_path)
    # past h11's 16 KB bound on a head still arriving: refused by the HTTP layer (400) when it
    # comes in pieces (a busy machine), by the guard (414) when whole; 9000 bytes above always
    # reach the guard
    yield HttpCase("size/query-of-70-KB", "GET", "/runs?limit=" + "x" * 70_000,
                   expect=(400, 414), protocol=True)
    yield HttpCase("size/query-of-7000", "GET", "/runs?limit=" + "x" * 7000, expect=(400,),
                   cause=("is not a whole number",))
    yield HttpCase("size/1500-parameters", "GET", "/runs?" + "a=1&" * 1500 + "limit=x",
                   expect=(400,), cause=("is not a whole number",))
    yield HttpCase("size/status-of-7000", "GET", "/assets/per/partitions?status=" + "s" * 7000,
                   expect=(400,), cause=("is not success or failed",))
    for route in ("/runs", "/assets/per/partitions"):
        for name, value in (("5000-digits", "9" * 5000), ("superscript-two", "%C2%B2"),
                            ("arabic-indic-three", "%D9%A3"),
                            ("fullwidth-ten", "%EF%BC%91%EF%BC%90"), ("underscore", "1_0"),
                            ("plus", "%2B1"), ("minus", "-1"), ("space", "%201"),
                            ("empty", ""), ("float", "1e3")):
            for param in ("limit", "offset"):
                yield HttpCase(f"int{route}/{param}={name}", "GET", f"{route}?{param}={value}",
                               expect=(400,), cause=("is not a whole number",))


def _path_http_cases() -> Iterator[HttpCase]:
    """Paths and names that try to leave where they point."""
    unknown = ("unknown target",)
    for path in ("/assets/..%2f..", "/assets/..%2f..%2fetc%2fpasswd/partitions",
                 "/assets/%ff%fe", "/assets/%00",
                 "/runs/{run}/output?node=..%2f..%2fetc%2fpasswd",
                 "/runs/{run}/output?node=%2fetc%2fpasswd",
                 "/runs/{run}/output?node=%00"):
        yield HttpCase(f"path{path.replace('{run}', 'RUN')}", "GET", path, expect=(404,),
                       cause=unknown)
    for key in ("..%2f..%2f..%2fetc%2fpasswd", "%2fetc%2fpasswd", "region%3D..%2f..%2fx"):
        yield HttpCase(f"path/output-key={key}", "GET", f"/runs/{{run}}/output?node=summary&"
                       f"key={key}", expect=(404,), cause=("left no result",))
    for path in ("/ui/..%2f..%2f..%2fetc%2fpasswd", "/ui/%2e%2e/app.py",
                 "/ui/..%5c..%5capp.py", "/runs/..%2f..%2fetc%2fpasswd/output",
                 "/cli/..%2f..%2fbin%2fsh", "/%2e%2e/%2e%2e/etc/passwd", "/runs/%2e%2e%2f%2e%2e"):
        yield HttpCase(f"path{path}", "GET", path, expect=(404,))
    for path in ("/runs/%2e%2e/output?node=summary", "/runs/%2e%2e", "/runs/..%00/events"):
        yield HttpCase(f"path{path}", "GET", path, expect=(404,), cause=("no run",))
    yield HttpCase("path/absolute-form", raw=b"GET http://evil.example/runs HTTP/1.1\r\n"
                   b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n", expect=(404,),
                   cause=("no route",))


def _protocol_http_cases() -> Iterator[HttpCase]:
    """Bytes that are not HTTP/1.1 at all."""
    for id, raw in (("tls-client-hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
                     + bytes(range(256))),
                    ("binary", bytes(range(256)) * 4),
                    ("http-0.9", b"GET /\r\n\r\n"),
                    ("http-9.9", b"GET /runs?limit=x HTTP/9.9\r\nHost: 127.0.0.1\r\n"
                     b"Connection: close\r\n\r\n"),
                    ("bare-line-feeds", b"GET /runs?limit=x HTTP/1.1\nHost: 127.0.0.1\n"
                     b"Connection: close\n\n"),
                    ("nul-in-request-line", b"GET /runs\x00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                    ("request-line-of-70-KB", b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")):
        yield HttpCase(f"protocol/{id}", raw=raw, protocol=True)
    yield HttpCase("protocol/unknown-method", "BREW", "/runs", expect=(405,),
                   cause=("BREW is not allowed",))
    yield HttpCase("protocol/trace", "TRACE", "/runs", expect=(405,))


def http_cases() -> list[HttpCase]:
    """Every HTTP case, by the way in it takes."""
    return [*_body_http_cases(), *_header_http_cases(), *_size_http_cases(),
            *_path_http_cases(), *_protocol_http_cases()]
