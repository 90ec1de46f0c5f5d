"""Discovery rules: which files, which nodes, what their arguments mean, what their hash covers.

Every test writes a tiny real project into tmp_path and reads it with the real discovery
functions; nothing is mocked and no user code is imported.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from barca.discover import discover, find_files, load_definitions
from barca.discover.hashing import definition_hash
from barca.discover.model import Definition, DimensionSpec, InputSpec
from barca.errors import UsageError


def write(root: Path, files: dict[str, str | tuple[str, ...]]) -> Path:
    """Write each file; a tuple value is several separately indented chunks joined."""
    for rel, text in files.items():
        chunks = text if isinstance(text, tuple) else (text,)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(textwrap.dedent(c).strip("\n") + "\n" for c in chunks))
    return root


def load(root: Path, *paths: str) -> dict[str, Definition]:
    return {d.node_id: d for d in load_definitions(root, list(paths), cwd=root)}


def error(root: Path, *paths: str) -> UsageError:
    with pytest.raises(UsageError) as caught:
        load_definitions(root, list(paths), cwd=root)
    return caught.value


def hashes(root: Path, *paths: str) -> dict[str, str]:
    return {node_id: d.definition_hash for node_id, d in load(root, *paths).items()}


def parts(d: Definition) -> dict[str, str]:
    return dict(d.hash_parts)


# --- which files -------------------------------------------------------------------------

BARCA_FILE = "from barca import asset\n\n@asset\ndef a() -> int:\n    return 1\n"


def test_walk_keeps_only_files_importing_barca_and_skips_tests_and_tooling(tmp_path):
    write(tmp_path, {
        "pipeline.py": BARCA_FILE,
        "sub/more.py": "import barca\n",
        "plain.py": "x = 1\n",
        "mentions.py": "# from barca import asset is only a comment here\n",
        "test_pipeline.py": BARCA_FILE, "pipeline_test.py": BARCA_FILE,
        "conftest.py": BARCA_FILE, "setup.py": BARCA_FILE,
        ".hidden/p.py": BARCA_FILE, "venv/p.py": BARCA_FILE, "tests/p.py": BARCA_FILE,
        "test/p.py": BARCA_FILE, "build/p.py": BARCA_FILE, "dist/p.py": BARCA_FILE,
        "node_modules/p.py": BARCA_FILE, "x/site-packages/p.py": BARCA_FILE,
        "x/__pycache__/p.py": BARCA_FILE,
    })
    assert find_files(tmp_path, [], cwd=tmp_path) == ["pipeline.py", "sub/more.py"]


def test_directory_argument_walks_only_that_directory(tmp_path):
    write(tmp_path, {"pipeline.py": BARCA_FILE, "sub/more.py": BARCA_FILE})
    assert find_files(tmp_path, ["sub"], cwd=tmp_path) == ["sub/more.py"]


def test_explicit_file_is_kept_without_a_barca_import(tmp_path):
    write(tmp_path, {"tests/test_odd.py": "x = 1\n"})
    assert find_files(tmp_path, ["tests/test_odd.py"], cwd=tmp_path) == ["tests/test_odd.py"]


def test_every_spelling_of_a_file_gives_the_same_root_relative_path(tmp_path):
    write(tmp_path, {"x/p.py": BARCA_FILE, "y/.keep": ""})
    spellings = [("x/p.py", tmp_path), ("./p.py", tmp_path / "x"),
                 (str(tmp_path / "x" / "p.py"), tmp_path / "y"), ("../x/p.py", tmp_path / "y")]
    for typed, cwd in spellings:
        assert find_files(tmp_path, [typed], cwd=cwd) == ["x/p.py"], typed


def test_file_outside_the_root_is_a_usage_error(tmp_path):
    write(tmp_path, {"project/.keep": "", "elsewhere/p.py": BARCA_FILE})
    with pytest.raises(UsageError, match="outside the project root") as caught:
        find_files(tmp_path / "project", ["../elsewhere/p.py"], cwd=tmp_path / "project")
    assert caught.value.remediation


def test_missing_file_is_a_usage_error_naming_it(tmp_path):
    with pytest.raises(UsageError, match="file not found: nope.py"):
        find_files(tmp_path, ["nope.py"], cwd=tmp_path)


def test_walk_finding_no_pipeline_file_names_the_directory_and_how_to_pass_one(tmp_path):
    write(tmp_path, {"plain.py": "x = 1\n"})
    with pytest.raises(UsageError, match="no pipeline files found under") as caught:
        find_files(tmp_path, [], cwd=tmp_path)
    assert "pipeline.py" in caught.value.remediation


# --- which functions are nodes -----------------------------------------------------------

def test_node_ids_are_root_relative_file_and_function_or_explicit_name(tmp_path):
    write(tmp_path, {"pipelines/sources.py": """
        from barca import asset, sensor, task

        @asset
        def raw() -> int:
            return 1

        @asset(name="renamed")
        def f() -> int:
            return 2

        @sensor()
        def watch() -> int:
            return 3

        @task
        def publish():
            pass
    """})
    defs = load(tmp_path)
    assert list(defs) == ["pipelines/sources.py:publish", "pipelines/sources.py:raw",
                          "pipelines/sources.py:renamed", "pipelines/sources.py:watch"]
    renamed = defs["pipelines/sources.py:renamed"]
    assert (renamed.name, renamed.function, renamed.file, renamed.line) == (
        "renamed", "f", "pipelines/sources.py", 8)
    assert [d.kind for d in defs.values()] == ["task", "asset", "asset", "sensor"]


def test_every_barca_import_spelling_is_recognised(tmp_path):
    write(tmp_path, {
        "a.py": "from barca import asset as make\n\n@make(retries=2)\ndef one():\n    pass\n",
        "b.py": "import barca as b\n\n@b.sensor\ndef two():\n    pass\n",
        "c.py": "import barca\n\n@barca.task()\ndef three():\n    pass\n",
    })
    defs = load(tmp_path)
    assert {k: d.kind for k, d in defs.items()} == {
        "a.py:one": "asset", "b.py:two": "sensor", "c.py:three": "task"}
    assert defs["a.py:one"].retries == 2


def test_names_not_provably_barcas_are_left_alone(tmp_path):
    write(tmp_path, {"p.py": """
        from barca import asset, task
        from celery_app import task

        @task(bind=True, queue="x")
        def celery_job(self):
            pass

        @asset
        def kept():
            pass
    """, "q.py": """
        from barca import asset
        try:
            from other import asset
        except ImportError:
            pass

        @asset(whatever=1)
        def not_ours():
            pass
    """})
    assert list(load(tmp_path)) == ["p.py:kept"]


# --- arguments ---------------------------------------------------------------------------

def test_defaults_and_plain_settings_are_read_from_the_source(tmp_path):
    write(tmp_path, {"p.py": """
        from barca import Manual, Schedule, asset, sensor, task
        import barca

        @asset
        def plain() -> dict:
            return {}

        @sensor
        def watch():
            return 1

        @task(freshness=barca.Schedule("*/5 * * * *"))
        def job():
            pass

        @asset(serializer="json", retries=3, retry_backoff=1.5, timeout_seconds=10,
               env=["API_URL", "REGION"], cutoff=True, weight=4, description="d",
               tags={"team": "fin"}, freshness=Manual)
        def full(x: int = 1) -> dict:
            return {}
    """})
    defs = load(tmp_path)
    plain = defs["p.py:plain"]
    assert (plain.freshness, plain.schedule, plain.serializer, plain.retries,
            plain.retry_backoff, plain.timeout_seconds, plain.env, plain.cutoff, plain.weight,
            plain.batch, plain.description, plain.tags, plain.inputs, plain.dimensions) == (
        "always", None, None, 1, 0.0, 300, (), False, 1, None, None, (), (), ())
    assert defs["p.py:watch"].freshness == "manual"
    assert (defs["p.py:job"].freshness, defs["p.py:job"].schedule) == ("schedule", "*/5 * * * *")
    full = defs["p.py:full"]
    assert (full.freshness, full.serializer, full.retries, full.retry_backoff,
            full.timeout_seconds, full.env, full.cutoff, full.weight, full.description,
            full.tags) == ("manual", "json", 3, 1.5, 10.0, ("API_URL", "REGION"), True, 4, "d",
                           (("team", "fin"),))
    assert full.params == ("x",)
    assert full.annotations == (("x", "int"), ("return", "dict"))


def test_batch_is_kept_as_source_text(tmp_path):
    write(tmp_path, {"p.py": """
        from barca import asset, partitions, batches_by

        @asset(partitions={"r": partitions(["a", "b"])}, batch=batches_by(len, max_size=2))
        def scored(r: list[str]) -> dict:
            return {}
    """})
    assert load(tmp_path)["p.py:scored"].batch == "batches_by(len, max_size=2)"


def test_partition_kinds_static_expression_and_from(tmp_path):
    write(tmp_path, {"p.py": """
        from barca import asset, partitions, partitions_from

        REGIONS = ["emea", "amer"]

        @asset(partitions={"day": partitions([1, "2", -3])})
        def days(day: str) -> str:
            return day

        @asset(partitions={"region": partitions(REGIONS + ["apac"])})
        def regions(region: str) -> str:
            return region

        @asset(partitions={"day": partitions_from(days)})
        def mirrored(day: str, days: str) -> str:
            return days

        @asset(partitions={"day": partitions_from(days)})
        def keys_only(day: str) -> str:
            return day
    """})
    defs = load(tmp_path)
    assert defs["p.py:days"].dimensions == (DimensionSpec("day", "static", keys=("1", "2", "-3")),)
    assert defs["p.py:regions"].dimensions == (
        DimensionSpec("region", "expr", expr="REGIONS + ['apac']"),)
    from_days = DimensionSpec("day", "from", source="p.py:days")
    assert defs["p.py:mirrored"].dimensions == (from_days,)
    assert defs["p.py:mirrored"].inputs == (InputSpec("days", "p.py:days", "value"),)
    assert defs["p.py:keys_only"].dimensions == (from_days,)
    assert defs["p.py:keys_only"].inputs == ()


def test_collect_and_underscore_inputs_get_their_modes(tmp_path):
    write(tmp_path, {"p.py": """
        from barca import asset, collect, partitions

        @asset(partitions={"k": partitions(["a", "b"])})
        def per_key(k: str) -> str:
            return k

        @asset
        def setup() -> None:
            return None

        @asset(inputs={"values": collect(per_key), "_ready": setup})
        def summary(values: list, _ready=None) -> int:
            return len(values)
    """})
    assert load(tmp_path)["p.py:summary"].inputs == (
        InputSpec("values", "p.py:per_key", "collect"), InputSpec("_ready", "p.py:setup", "order"))


# --- resolving inputs across files -------------------------------------------------------

RAW = """
    from barca import asset

    @asset
    def raw() -> int:
        return 1
"""


def test_inputs_resolve_through_every_import_style(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "", "pkg/src.py": RAW, "sibling.py": RAW.replace("raw", "sib"),
        "pkg/consumer.py": """
            from barca import asset
            from .src import raw as relative_raw

            @asset(inputs={"x": relative_raw})
            def rel(x):
                return x
        """,
        "main.py": """
            import barca as b
            import pkg.src
            import pkg.src as m
            from pkg import src
            from pkg.src import raw as aliased
            from sibling import sib

            @b.asset(inputs={"a": aliased, "b": m.raw, "c": pkg.src.raw, "d": src.raw,
                             "e": sib, "f": b.asset_ref("pkg/src.py:raw")})
            def uses(a, b, c, d, e, f):
                return a
        """,
    })
    defs = load(tmp_path)
    assert {i.param: i.source for i in defs["main.py:uses"].inputs} == {
        "a": "pkg/src.py:raw", "b": "pkg/src.py:raw", "c": "pkg/src.py:raw",
        "d": "pkg/src.py:raw", "e": "sibling.py:sib", "f": "pkg/src.py:raw"}
    assert defs["pkg/consumer.py:rel"].inputs == (InputSpec("x", "pkg/src.py:raw"),)


def test_same_file_wins_and_unique_project_name_is_the_fallback(tmp_path):
    write(tmp_path, {"a.py": RAW, "b.py": (RAW, """
        @asset(inputs={"raw": raw})
        def local(raw):
            return raw
    """), "c.py": RAW.replace("raw", "only_here"), "d.py": """
        from barca import asset, asset_ref

        @asset(inputs={"x": only_here, "y": asset_ref("c.py:only_here")})
        def far(x, y):
            return x
    """})
    defs = load(tmp_path)
    assert defs["b.py:local"].inputs == (InputSpec("raw", "b.py:raw"),)
    assert [i.source for i in defs["d.py:far"].inputs] == ["c.py:only_here", "c.py:only_here"]


def test_asset_ref_path_may_be_relative_to_the_referencing_file(tmp_path):
    write(tmp_path, {"sub/src.py": RAW, "sub/use.py": """
        from barca import asset, asset_ref

        @asset(inputs={"x": asset_ref("src.py:raw")})
        def use(x):
            return x
    """})
    assert load(tmp_path)["sub/use.py:use"].inputs == (InputSpec("x", "sub/src.py:raw"),)


# --- usage errors ------------------------------------------------------------------------

def test_syntax_error_in_a_pipeline_file_names_file_line_and_column(tmp_path):
    write(tmp_path, {"pipeline.py": "from barca import asset\n\n@asset\ndef f(:\n    pass\n"})
    err = error(tmp_path)
    assert err.message.startswith("Parse error: syntax error in pipeline.py: line 4, column 7")
    assert "def f(:" in err.remediation and err.exit_code == 2


def test_misspelt_argument_lists_accepted_ones_and_suggests_the_close_one(tmp_path):
    write(tmp_path, {"pipeline.py": """
        from barca import asset

        @asset(
            retires=3)
        def f():
            pass
    """})
    err = error(tmp_path)
    assert err.message.startswith("Parse error: pipeline.py:f (line 4): @asset has no argument "
                                  "'retires'; accepted: name, inputs, partitions,")
    assert err.remediation == "Did you mean retries?"


def test_unknown_argument_far_from_any_accepted_one_gets_no_guess(tmp_path):
    write(tmp_path, {"p.py": "from barca import task\n\n@task(after=1)\ndef f():\n    pass\n"})
    err = error(tmp_path)
    assert "'after'" in err.message and "Did you mean" not in err.remediation


def test_argument_only_valid_on_other_decorators_is_unknown_here(tmp_path):
    write(tmp_path, {"p.py": "from barca import sensor\n\n@sensor(batch=2)\ndef s():\n  pass\n"})
    assert "@sensor has no argument 'batch'" in error(tmp_path).message


@pytest.mark.parametrize("call, expected", [
    ('@asset("x")', "@asset takes no positional arguments"),
    ("@asset(*opts)", "@asset(*opts) cannot be read without running the file"),
    ("@asset(**opts)", "@asset(**opts) cannot be read without running the file"),
], ids=["positional", "star-args", "star-star-kwargs"])
def test_arguments_the_planner_cannot_see_are_rejected(tmp_path, call, expected):
    write(tmp_path, {"p.py": f"from barca import asset\nopts = {{}}\n\n{call}\ndef f():\n  pass\n"})
    err = error(tmp_path)
    assert err.message.startswith("Parse error: p.py:f (line 4): " + expected)
    assert "keyword" in err.remediation


def test_sensor_with_inputs_is_rejected(tmp_path):
    write(tmp_path, {"p.py": (RAW, """
        from barca import sensor

        @sensor(inputs={"raw": raw})
        def watch(raw):
            return raw
    """)})
    err = error(tmp_path)
    assert "sensor 'p.py:watch' cannot have inputs" in err.message
    assert err.message.startswith("Parse error: p.py:watch (line ")


@pytest.mark.parametrize("decorator, signature, expected, fix", [
    ('@asset(inputs={"y": raw})', "def f(x=1):",
     "inputs= key 'y' is not a parameter of f", "add a parameter 'y'"),
    ('@asset(partitions={"region": partitions(["a"])})', "def f():",
     "partition dimension 'region' is not a parameter of f", "Add a parameter 'region'"),
    ("@asset", "def f(x):",
     "parameter 'x' of f has no default and nothing supplies it", "inputs="),
    ('@asset(env="HOME")', "def f():",
     "env= must be a literal list of variable names", 'env=["API_URL"'),
    ('@asset(env=["A", NAME])', "def f():",
     "env= must be a literal list of variable names", 'env=["API_URL"'),
], ids=["input-not-param", "dimension-not-param", "unsupplied-param", "env-str", "env-name"])
def test_signature_and_literal_checks(tmp_path, decorator, signature, expected, fix):
    write(tmp_path, {"p.py": (RAW, f"""
    from barca import partitions
    NAME = "B"

    {decorator}
    {signature}
        pass
    """)})
    err = error(tmp_path)
    assert err.message.startswith("Parse error: p.py:f (line ")
    assert expected in err.message and fix in err.remediation


def test_a_task_other_code_calls_is_exempt_from_the_unsupplied_parameter_rule(tmp_path):
    """A parallel() branch gets its arguments from the call; a task nothing calls does not."""
    write(tmp_path, {"p.py": "import functools\nfrom barca import parallel, task\n\n"
                             "@task\ndef branch(item):\n    pass\n\n"
                             "@task\ndef fan() -> list:\n"
                             "    return parallel(functools.partial(branch, 1))\n"})
    assert list(load(tmp_path)) == ["p.py:branch", "p.py:fan"]
    write(tmp_path, {"p.py": "from barca import task\n\n@task\ndef branch(item):\n    pass\n"})
    err = error(tmp_path)
    assert "parameter 'item' of branch has no default" in err.message
    assert 'inputs={"item": upstream}' in err.remediation


@pytest.mark.parametrize("value", [
    'partitions()', 'partitions(["a"], ["b"])', 'partitions(values=["a"])',
    'partitions_from()', 'partitions_from(raw, raw)', 'partitions_from(source=raw)',
])
def test_one_argument_helpers_need_exactly_one_positional(tmp_path, value):
    write(tmp_path, {"p.py": (RAW, f"""
    from barca import partitions, partitions_from

    @asset(partitions={{"k": {value}}})
    def f(k):
        pass
    """)})
    err = error(tmp_path)
    assert "takes exactly one positional argument" in err.message
    assert err.remediation.startswith("pass it as the first argument")


@pytest.mark.parametrize("value, fix", [
    ("collect()", "collect(upstream)"), ("collect(raw, raw)", "collect(upstream)"),
    ("collect(upstream=raw)", "collect(raw)"), ("collect(asset_fn=raw)", "collect(raw)")])
def test_collect_needs_exactly_one_positional(tmp_path, value, fix):
    write(tmp_path, {"p.py": (RAW, f"""
    from barca import collect

    @asset(inputs={{"x": {value}}})
    def f(x):
        pass
    """)})
    assert error(tmp_path).remediation == f"pass it as the first argument: {fix}"


def test_input_naming_no_node(tmp_path):
    write(tmp_path, {"pipeline.py": """
        from barca import asset

        def helper():
            pass

        @asset(inputs={"x": missing})
        def f(x):
            pass
    """})
    err = error(tmp_path)
    assert err.message == ("Parse error: pipeline.py:f (line 6): input 'missing' of "
                           "pipeline.py:f names no @asset/@sensor/@task")
    assert "Run `barca list` to see the nodes" in err.remediation


def test_partitions_from_naming_no_node(tmp_path):
    write(tmp_path, {"p.py": """
        from barca import asset, partitions_from

        @asset(partitions={"k": partitions_from(nowhere)})
        def f(k):
            pass
    """})
    assert "partitions_from(nowhere) of p.py:f names no @asset/@sensor/@task" in (
        error(tmp_path).message)


def test_import_of_a_name_that_is_not_a_node_in_that_module(tmp_path):
    write(tmp_path, {
        "pipelines/__init__.py": "",
        "pipelines/common.py": "def close():\n    return 1\n",
        "pipelines/main.py": """
            from barca import asset
            from pipelines.common import close

            @asset(inputs={"c": close})
            def report(c):
                return c
        """,
    })
    err = error(tmp_path)
    assert err.message == (
        "Parse error: pipelines/main.py:report (line 4): 'close' is imported from "
        "pipelines.common (pipelines/common.py), but no @asset/@task/@sensor named 'close' is "
        "defined there")


def test_import_of_a_node_whose_file_was_not_passed_says_to_pass_it(tmp_path):
    write(tmp_path, {"src.py": RAW, "use.py": """
        from barca import asset
        from src import raw

        @asset(inputs={"r": raw})
        def use(r):
            return r
    """})
    assert "pass src.py too" in error(tmp_path, "use.py").remediation


def test_ambiguous_name_lists_the_candidates(tmp_path):
    write(tmp_path, {"a.py": RAW, "b.py": RAW, "c.py": """
        from barca import asset

        @asset(inputs={"r": raw})
        def use(r):
            return r
    """})
    err = error(tmp_path)
    assert "is ambiguous" in err.message and "a.py:raw, b.py:raw" in err.message


def test_syntax_error_in_an_imported_helper_names_the_helper_and_the_importer(tmp_path):
    write(tmp_path, {
        "helpers.py": "def ok():\n    return 1\n\n\ndef broken(:\n    pass\n",
        "pipeline.py": """
            from barca import asset
            from helpers import ok

            @asset
            def raw():
                return ok()
        """,
    })
    err = error(tmp_path)
    assert err.message.startswith("Parse error: syntax error in helpers.py: line 5, column 12:")
    assert "(imported by pipeline.py, so step 'pipeline.py:raw' cannot run)" in err.message


def test_two_nodes_with_one_id_are_rejected(tmp_path):
    write(tmp_path, {"p.py": (RAW, """
        @asset(name="raw")
        def other():
            pass
    """)})
    assert "node id 'p.py:raw' is already used by raw" in error(tmp_path).message


# --- the definition hash -----------------------------------------------------------------

PROJECT = {
    "helpers.py": """
        RATE = 2


        def clean(values):
            return [v * RATE for v in values]


        def unused():
            return 0
    """,
    "pipeline.py": """
        from barca import asset
        from helpers import clean

        @asset(retries=1, description="raw numbers")
        def raw() -> list:
            return [1, 2, 3]

        @asset(inputs={"raw": raw})
        def cleaned(raw: list) -> list:
            return clean(raw)

        @asset(inputs={"raw": raw})
        def doubled(raw: list) -> list:
            return raw * 2
    """,
}


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def changed(root: Path, rel: str, old: str, new: str) -> set[str]:
    before = hashes(root)
    edit(root, rel, old, new)
    after = hashes(root)
    assert set(before) == set(after)
    return {k for k in before if before[k] != after[k]}


def test_hash_is_the_combination_of_its_sorted_parts(tmp_path):
    write(tmp_path, PROJECT)
    d = load(tmp_path)["pipeline.py:cleaned"]
    labels = [label for label, _ in d.hash_parts]
    assert labels == sorted(labels) == [
        "code", "decorator argument inputs", "helper helpers.py:RATE", "helper helpers.py:clean",
        "kind"]
    assert d.definition_hash == definition_hash(d.hash_parts)
    assert len(d.definition_hash) == 32


def test_editing_the_body_changes_only_that_function(tmp_path):
    write(tmp_path, PROJECT)
    assert changed(tmp_path, "pipeline.py", "return raw * 2", "return raw * 3") == {
        "pipeline.py:doubled"}


def test_comments_and_whitespace_inside_the_function_change_nothing(tmp_path):
    write(tmp_path, PROJECT)
    assert changed(tmp_path, "pipeline.py", "return raw * 2", "return raw*2  # twice") == set()
    assert changed(tmp_path, "helpers.py", "RATE = 2", "RATE = (2)  # per unit") == set()


def test_editing_an_unused_helper_changes_nothing(tmp_path):
    write(tmp_path, PROJECT)
    assert changed(tmp_path, "helpers.py", "return 0", "return 42") == set()


def test_editing_a_used_helper_changes_exactly_its_users(tmp_path):
    write(tmp_path, PROJECT)
    assert changed(tmp_path, "helpers.py", "v * RATE", "v * RATE + 1") == {"pipeline.py:cleaned"}
    assert changed(tmp_path, "helpers.py", "RATE = 2", "RATE = 3") == {"pipeline.py:cleaned"}


@pytest.mark.parametrize("old, new", [
    ("retries=1", "retries=5"),
    ('description="raw numbers"', 'description="other"'),
    ('description="raw numbers"', 'description="raw numbers", name="numbers"'),
    ("retries=1", "retries=1, timeout_seconds=5, retry_backoff=2, weight=3, cutoff=True"),
    ("retries=1", 'retries=1, tags={"a": "b"}, env=["X"], freshness=Manual'),
], ids=["retries", "description", "name", "timing", "metadata"])
def test_uncounted_arguments_change_no_hash(tmp_path, old, new):
    write(tmp_path, PROJECT)
    edit(tmp_path, "pipeline.py", "from barca import asset", "from barca import Manual, asset")
    before = {k.replace(":numbers", ":raw"): v for k, v in hashes(tmp_path).items()}
    edit(tmp_path, "pipeline.py", old, new)
    after = {k.replace(":numbers", ":raw"): v for k, v in hashes(tmp_path).items()}
    assert before == after


@pytest.mark.parametrize("old, new, node, part", [
    ("retries=1", 'retries=1, serializer="pickle"', "raw", "decorator argument serializer"),
    ('@asset(inputs={"raw": raw})\ndef doubled', '@asset(inputs={"raw": cleaned})\ndef doubled',
     "doubled", "decorator argument inputs"),
], ids=["serializer", "inputs"])
def test_counted_arguments_change_the_hash(tmp_path, old, new, node, part):
    write(tmp_path, PROJECT)
    before = load(tmp_path)[f"pipeline.py:{node}"]
    edit(tmp_path, "pipeline.py", old, new)
    after = load(tmp_path)[f"pipeline.py:{node}"]
    assert before.definition_hash != after.definition_hash
    differing = {label for label in set(parts(before)) | set(parts(after))
                 if parts(before).get(label) != parts(after).get(label)}
    assert differing == {part}


def test_inputs_part_is_written_as_resolved_ids(tmp_path):
    write(tmp_path, PROJECT)
    before = parts(load(tmp_path)["pipeline.py:doubled"])["decorator argument inputs"]
    edit(tmp_path, "pipeline.py", '@asset(inputs={"raw": raw})\ndef doubled',
         '@asset(inputs={"raw": asset_ref("pipeline.py:raw")})\ndef doubled')
    edit(tmp_path, "pipeline.py", "from barca import asset", "from barca import asset, asset_ref")
    assert parts(load(tmp_path)["pipeline.py:doubled"])["decorator argument inputs"] == before


def test_reordering_and_reformatting_decorator_keywords_changes_nothing(tmp_path):
    write(tmp_path, {"p.py": """
        from barca import asset, partitions

        @asset(serializer="json", partitions={"k": partitions(["a", "b"])}, retries=2)
        def f(k):
            return k
    """})
    before = hashes(tmp_path)
    edit(tmp_path, "p.py", '@asset(serializer="json", partitions={"k": partitions(["a", "b"])}, '
         'retries=2)', "@asset(\n    retries=3,\n    partitions={'k': partitions(['a', 'b', 'c'])},"
         "\n    serializer='json',\n)")
    assert hashes(tmp_path) == before


def test_partition_shape_counts_but_not_the_key_values(tmp_path):
    write(tmp_path, {"p.py": """
        from barca import asset, partitions

        @asset(partitions={"k": partitions(["a"])})
        def f(k, j=None):
            return k
    """})
    before = hashes(tmp_path)
    assert changed(tmp_path, "p.py", '["a"]', '["a", "b"]') == set()
    assert hashes(tmp_path) == before
    assert changed(tmp_path, "p.py", '{"k": partitions(["a", "b"])}',
                   '{"k": partitions(["a", "b"]), "j": partitions(["x"])}') == {"p.py:f"}


def test_foreign_decorators_count(tmp_path):
    write(tmp_path, {"p.py": """
        import functools
        from barca import asset

        @asset
        @functools.lru_cache(maxsize=1)
        def f():
            return 1
    """})
    d = load(tmp_path)["p.py:f"]
    assert "decorator functools.lru_cache(maxsize=1)" in parts(d)
    assert changed(tmp_path, "p.py", "maxsize=1", "maxsize=2") == {"p.py:f"}


HELPER_FORMS = {
    "plain": ("from pkg.mod import f", "f()"),
    "alias": ("from pkg.mod import f as g", "g()"),
    "module-alias": ("import pkg.mod as m", "m.f()"),
    "dotted": ("import pkg.mod", "pkg.mod.f()"),
    "from-package": ("from pkg import mod", "mod.f()"),
    "inside-function": ("", None),
}


@pytest.mark.parametrize("form", list(HELPER_FORMS))
def test_every_import_style_reaches_the_same_helper(tmp_path, form):
    imports, call = HELPER_FORMS[form]
    body = "return " + call if call else "from pkg.mod import f\n    return f()"
    write(tmp_path, {
        "pkg/mod.py": ("from pkg.deep import g\n\ndef f():\n    return g()\n\n"
                       "def other():\n    pass\n"),
        "pkg/deep.py": "def g():\n    return 1\n",
        "p.py": f"from barca import asset\n{imports}\n\n@asset\ndef node():\n    {body}\n",
    })
    helper_labels = {label for label, _ in load(tmp_path)["p.py:node"].hash_parts
                     if label.startswith("helper")}
    assert helper_labels == {"helper pkg/mod.py:f", "helper pkg/deep.py:g"}
    assert changed(tmp_path, "pkg/deep.py", "return 1", "return 2") == {"p.py:node"}


def test_classes_count_whole_with_what_they_use(tmp_path):
    write(tmp_path, {
        "models.py": """
            BASE = 10

            class Scaler:
                factor = 2

                def apply(self, x):
                    return x * self.factor + BASE
        """,
        "p.py": """
            from barca import asset
            from models import Scaler

            @asset
            def scaled():
                return Scaler().apply(1)
        """,
    })
    assert {"helper models.py:Scaler", "helper models.py:BASE"} <= set(
        parts(load(tmp_path)["p.py:scaled"]))
    assert changed(tmp_path, "models.py", "factor = 2", "factor = 3") == {"p.py:scaled"}


def test_module_used_as_a_value_hashes_the_whole_module(tmp_path):
    write(tmp_path, {"helpers.py": "def a():\n    return 1\n", "p.py": """
        from barca import asset
        import helpers

        @asset
        def f():
            return getattr(helpers, "a")()
    """})
    assert "helper helpers.py" in parts(load(tmp_path)["p.py:f"])
    assert changed(tmp_path, "helpers.py", "return 1", "return 2") == {"p.py:f"}


def test_stdlib_and_installed_packages_are_not_followed(tmp_path):
    write(tmp_path, {"p.py": """
        import json
        import os.path
        from collections import OrderedDict
        from barca import asset

        @asset
        def f():
            return json.dumps(OrderedDict(a=os.path.sep))
    """})
    assert [label for label, _ in load(tmp_path)["p.py:f"].hash_parts] == ["code", "kind"]


def test_import_cycles_terminate_and_chains_are_followed_to_any_depth(tmp_path):
    files = {f"m{i}.py": f"from m{i + 1} import f{i + 1}\n\ndef f{i}():\n    return f{i + 1}()\n"
             for i in range(8)}
    files["m8.py"] = "from m0 import f0\n\ndef f8():\n    return f0 if False else 8\n"
    files["p.py"] = ("from barca import asset\nfrom m0 import f0\n\n"
                     "@asset\ndef top():\n    return f0()\n")
    write(tmp_path, files)
    helper_parts = [label for label in parts(load(tmp_path)["p.py:top"]) if "helper" in label]
    assert len(helper_parts) == 9
    assert changed(tmp_path, "m8.py", "else 8", "else 9") == {"p.py:top"}


def test_a_module_beside_the_pipeline_shadows_one_at_the_root(tmp_path):
    write(tmp_path, {
        "helpers.py": "def h():\n    return 'root'\n",
        "sub/helpers.py": "def h():\n    return 'sub'\n",
        "sub/p.py": ("from barca import asset\nfrom helpers import h\n\n"
                     "@asset\ndef f():\n    return h()\n"),
    })
    assert "helper sub/helpers.py:h" in parts(load(tmp_path)["sub/p.py:f"])


def test_parameters_named_like_module_names_are_not_uses(tmp_path):
    write(tmp_path, PROJECT)
    assert not any(label.startswith("helper pipeline.py:raw")
                   for label in parts(load(tmp_path)["pipeline.py:doubled"]))


def test_hash_does_not_depend_on_file_order(tmp_path):
    write(tmp_path, {"a.py": RAW, "b.py": RAW.replace("raw", "other")})
    forward = discover(tmp_path, ["a.py", "b.py"])
    backward = discover(tmp_path, ["b.py", "a.py"])
    assert forward == backward


def test_hash_does_not_depend_on_the_file_spelling(tmp_path):
    write(tmp_path, PROJECT)
    plain = load(tmp_path, "pipeline.py")
    spelled = {d.node_id: d for d in load_definitions(
        tmp_path, [str(tmp_path / "pipeline.py")], cwd=Path(os.sep))}
    assert plain == spelled


@pytest.mark.parametrize("decorator, expected", [
    ('@sensor(freshness=Schedule("* *"))', "is not a cron expression"),
    ('@sensor(name="a b")', "name= must be a non-empty string literal"),
    ('@sensor(serializer="yaml")', "serializer= must be one of"),
    ("@sensor(retries=0)", "retries= must be an integer literal of at least 1"),
    ('@sensor(tags={"a": 1})', "tags= must be a dict literal of strings"),
    ('@sensor(partitions=PARTS)', "partitions= must be a dict literal"),
], ids=["cron", "name", "serializer", "retries", "tags", "partitions"])
def test_setting_values_are_checked_at_parse_time(tmp_path, decorator, expected):
    write(tmp_path, {"p.py": f"""
        from barca import Always, Schedule, sensor
        PARTS = {{}}

        {decorator}
        def s():
            return 1
    """})
    err = error(tmp_path)
    assert err.message.startswith("Parse error: p.py:s (line 4): ") and expected in err.message
    assert err.remediation


def test_none_values_mean_the_default(tmp_path):
    write(tmp_path, {"p.py": """
        from barca import asset

        @asset(inputs=None, partitions=None, env=None, serializer=None, name=None, tags=None)
        def f():
            return 1

        @asset
        def g():
            return 1
    """})
    defs = load(tmp_path)
    assert defs["p.py:f"].inputs == () and defs["p.py:f"].env == ()
    assert [label for label, _ in defs["p.py:f"].hash_parts] == ["code", "kind"]


def test_names_bound_in_module_level_branches_hash_the_whole_module(tmp_path):
    write(tmp_path, {"helpers.py": """
        import os

        if os.environ.get("FAST"):
            RATE = 1
        else:
            RATE = 2

        def unused():
            return 0
    """, "p.py": """
        from barca import asset
        from helpers import RATE

        @asset
        def f():
            return RATE
    """})
    assert "helper helpers.py" in parts(load(tmp_path)["p.py:f"])
    assert changed(tmp_path, "helpers.py", "return 0", "return 1") == {"p.py:f"}


def test_imports_in_module_level_branches_are_followed_like_imports(tmp_path):
    write(tmp_path, {"fast.py": "def dumps(x):\n    return 'fast'\n", "p.py": """
        from barca import asset
        try:
            from fast import dumps
        except ImportError:
            from json import dumps

        @asset
        def f():
            return dumps(1)
    """})
    assert "helper fast.py:dumps" in parts(load(tmp_path)["p.py:f"])
    assert "helper p.py" not in parts(load(tmp_path)["p.py:f"])


def test_decorators_of_helpers_count_and_are_followed(tmp_path):
    write(tmp_path, {"helpers.py": """
        def wrap(fn):
            return fn

        @wrap
        def h():
            return 1
    """, "p.py": """
        from barca import asset
        from helpers import h

        @asset
        def f():
            return h()
    """})
    assert {"helper helpers.py:h", "helper helpers.py:wrap"} <= set(parts(load(tmp_path)["p.py:f"]))
    assert changed(tmp_path, "helpers.py", "    return fn", "    return fn  # same") == set()
    assert changed(tmp_path, "helpers.py", "    return fn", "    return print or fn") == {
        "p.py:f"}


def test_project_star_imports_are_followed(tmp_path):
    write(tmp_path, {"base.py": "def h():\n    return 1\n", "p.py": """
        from base import *
        from barca import asset

        @asset
        def f():
            return h()
    """, "q.py": """
        from barca import asset
        from base import *

        @asset
        def not_provably_barcas():
            return h()
    """})
    defs = load(tmp_path)
    assert "helper base.py:h" in parts(defs["p.py:f"])
    assert list(defs) == ["p.py:f"]  # a star import after the barca import may rebind asset


def test_a_serializer_named_by_a_constant_is_read_and_followed(tmp_path):
    write(tmp_path, {"p.py": """
        from barca import asset

        FMT = "pickle"

        @asset(serializer=FMT)
        def f():
            return 1
    """})
    d = load(tmp_path)["p.py:f"]
    assert d.serializer == "pickle" and "helper p.py:FMT" in parts(d)


def test_description_and_tags_may_name_module_constants_read_as_inputs_constants_are(tmp_path):
    write(tmp_path, {"p.py": """
        from barca import asset

        DESCRIPTION: str = "daily sales"
        TAGS = {"team": "finance"}

        @asset(description=DESCRIPTION, tags=TAGS)
        def f() -> int:
            return 1

        @asset(description=DESCRIPTION, tags=TAGS)
        def g() -> int:
            return len(DESCRIPTION)
    """})
    defs = load(tmp_path)
    for node in ("p.py:f", "p.py:g"):
        assert defs[node].description == "daily sales"
        assert defs[node].tags == (("team", "finance"),)
    bad = [  # what cannot be read without running the file
        ("tags=TAGS", 'TAGS = {"team": "finance"}\nTAGS["team"] = "ops"\n'),
        ("tags=TAGS", 'TAGS = {"team": "finance"}\nOTHER = TAGS\n'),
        ("description=DESCRIPTION", 'from names import DESCRIPTION\n'),
        ("description=DESCRIPTION", 'DESCRIPTION = "a"\nif True:\n    DESCRIPTION = "b"\n'),
    ]
    for argument, head in bad:
        write(tmp_path, {"p.py": "from barca import asset\n" + head +
                         f"\n@asset({argument})\ndef f() -> int:\n    return 1\n"})
        message = str(error(tmp_path))
        assert "or a module-level name bound once to one" in message, (argument, message)
