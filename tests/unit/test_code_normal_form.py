"""What counts as a code change (discover.normal_form): a function's hash follows its syntax
tree, so comments, layout and spelling a formatter changes count for nothing, while every
token that can change what runs still counts. Checked on the definition hash that discovery
gives a real pipeline file, helper module included."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from barca.discover import load_definitions
from barca.discover.normal_form import normal_bytes

PIPELINE = '''
from barca import asset
from helpers import scale, LABEL


@asset()
def numbers(limit: int = 3) -> dict:
    """Numbers up to a limit.

    Keyed by name.
    """
    values = [scale(v) for v in range(limit)]  # scaled
    return {f"{LABEL}-{i}": v for i, v in enumerate(values)}
'''

HELPERS = '''
LABEL = "n"


def scale(v):
    return v * 2
'''


def _hash(root: Path, pipeline: str, helpers: str = HELPERS) -> str:
    (root / "pipeline.py").write_text(textwrap.dedent(pipeline))
    (root / "helpers.py").write_text(textwrap.dedent(helpers))
    (root / "barca.toml").write_text("")
    [d] = load_definitions(root, ["pipeline.py"], cwd=root)
    return d.definition_hash


SAME_PIPELINE = {
    "comments": PIPELINE.replace("# scaled", "# scaled twice, see helpers").replace(
        "def numbers", "# the numbers\ndef numbers"),
    "layout": PIPELINE.replace("[scale(v) for v in range(limit)]",
                               "[\n        scale( v )\n        for v in range(limit)\n    ]"),
    "quotes": PIPELINE.replace('f"{LABEL}-{i}"', "f'{LABEL}-{i}'"),
    "parentheses": PIPELINE.replace("return {", "return ({").replace(
        "enumerate(values)}", "enumerate(values)})"),
    "trailing comma": PIPELINE.replace("limit: int = 3", "limit: int = 3,"),
    "docstring indentation": PIPELINE.replace("    Keyed by name.", "        Keyed by name.  "),
    "docstring quotes": PIPELINE.replace('"""', "'''"),
    "number spelling": PIPELINE.replace("= 3)", "= 0x3)"),
}

DIFFERENT_PIPELINE = {
    "default value": PIPELINE.replace("= 3)", "= 4)"),
    "string": PIPELINE.replace('f"{LABEL}-{i}"', 'f"{LABEL}_{i}"'),
    "f-string field": PIPELINE.replace('f"{LABEL}-{i}"', 'f"{LABEL}-{i!r}"'),
    "docstring words": PIPELINE.replace("Keyed by name.", "Keyed by number."),
    "annotation": PIPELINE.replace("limit: int", "limit: float"),
    "name": PIPELINE.replace("for i, v in enumerate(values)", "for i, v in enumerate(values[:])"),
    "int or float": PIPELINE.replace("= 3)", "= 3.0)"),
    "decorator": PIPELINE.replace("@asset()\n", "@asset()\n@staticmethod\n"),
}


@pytest.mark.parametrize("edited", list(SAME_PIPELINE.values()), ids=list(SAME_PIPELINE))
def test_formatting_and_comments_keep_the_hash(tmp_path, edited):
    assert edited != PIPELINE
    assert _hash(tmp_path, edited) == _hash(tmp_path, PIPELINE)


@pytest.mark.parametrize("edited", list(DIFFERENT_PIPELINE.values()),
                         ids=list(DIFFERENT_PIPELINE))
def test_every_token_that_can_change_behaviour_changes_the_hash(tmp_path, edited):
    assert edited != PIPELINE
    assert _hash(tmp_path, edited) != _hash(tmp_path, PIPELINE)


def test_a_helper_counts_by_its_tree_too(tmp_path):
    base = _hash(tmp_path, PIPELINE)
    reformatted = '# helpers\nLABEL = \'n\'  # the prefix\ndef scale( v ):\n  return v*2\n'
    assert _hash(tmp_path, PIPELINE, reformatted) == base
    assert _hash(tmp_path, PIPELINE, HELPERS.replace('"n"', '"m"')) != base
    assert _hash(tmp_path, PIPELINE, HELPERS.replace("v * 2", "v * 2.0")) != base


@pytest.mark.parametrize("a, b", [
    ("a-b", "a - b"), ('"x"', "'x'"), ("(1,)", "1,"), ('"a" "b"', '"ab"'), ("u'x'", "'x'"),
    ("x = [\n  1,\n]", "x = [1]"), ("def f(): pass", "def f():\n    pass  # nothing"),
])
def test_one_program_one_form(a, b):
    assert normal_bytes(ast.parse(a)) == normal_bytes(ast.parse(b))


@pytest.mark.parametrize("a, b", [
    ("1", "1.0"), ("1", "True"), ("'1'", "1"), ("b'x'", "'x'"), ("a - b", "b - a"),
    ("f'{x}'", "f'{x!s}'"), ("f'{x}'", "'{x}'"), ("x = 1", "x: int = 1"), ("[1]", "(1,)"),
    ("def f(a=1): pass", "def f(a=2): pass"), ("def f(): 'doc'", "def f(): 'Doc'"),
    ("return", "return None"), ("x = {'a': 1, **y}", "x = {'a': 1, None: y}"),
])
def test_two_programs_two_forms(a, b):
    wrap = "def _():\n    {}\n".format if "return" in a else str
    assert normal_bytes(ast.parse(wrap(a))) != normal_bytes(ast.parse(wrap(b)))


def test_an_f_string_is_its_fields_and_its_text_whatever_the_parser_splits():
    """Python 3.12.1 parses `f"{a:{b}}"`'s format spec with an empty literal after `{b}`;
    3.11 and 3.13 without: one form for both. Adjacent literal pieces are one text."""
    parsed = ast.parse('f"{a:{b}}"').body[0].value
    spec = parsed.values[0].format_spec
    with_empty = ast.JoinedStr([*spec.values, ast.Constant("")])
    assert normal_bytes(with_empty) == normal_bytes(spec)
    split = ast.JoinedStr([ast.Constant("a"), ast.Constant("b")])
    assert normal_bytes(split) == normal_bytes(ast.parse('f"ab"').body[0].value)


def test_a_long_expression_python_compiles_has_a_form():
    """`1 + 1 + ...` is a tree as deep as it is long: walked without recursion, it cannot
    run into the interpreter's recursion limit where the compiler does not."""
    tree = ast.parse("+".join(["1"] * 900))
    compile(tree, "long.py", "exec")
    assert normal_bytes(tree).count(b"BinOp") == 899
