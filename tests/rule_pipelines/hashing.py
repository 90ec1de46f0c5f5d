"""The project of tests/engine/test_hashing_rules.py and tests/e2e/test_hashing_cone.py:
helpers across modules, reached in each import style, used and unused."""

PROJECT = {
    "lib/__init__.py": "",
    "lib/deep.py": """
        SCALE = 10

        def scale(x):
            return x * SCALE

        def unrelated():
            return "u"
    """,
    "lib/mid.py": """
        from lib.deep import scale

        def prepare(x):
            return scale(x) + 1

        class Fmt:
            def show(self, x):
                return f"<{x}>"

        def unused_helper(x):
            return x - 1
    """,
    "helpers.py": """
        def used(x):
            return x + 1

        def unused(x):
            return x - 1
    """,
    "pipeline.py": """
        from barca import asset
        import lib.mid
        import lib.mid as m
        from lib import mid
        from lib.mid import Fmt, prepare
        from helpers import used

        @asset()
        def source() -> int:
            return 1

        @asset(inputs={"source": source})
        def uses_helper(source: int) -> int:
            return used(source)

        @asset(inputs={"value": uses_helper})
        def reads_user(value: int) -> int:
            return value * 2

        @asset(inputs={"source": source})
        def no_helper(source: int) -> int:
            return source + 5

        @asset()
        def style_from() -> int:
            return prepare(1)

        @asset()
        def style_alias() -> int:
            return m.prepare(2)

        @asset()
        def style_module() -> int:
            return mid.prepare(3)

        @asset()
        def style_dotted() -> int:
            return lib.mid.prepare(4)

        @asset()
        def uses_class() -> str:
            return Fmt().show(1)
    """,
}
