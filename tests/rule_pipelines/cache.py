"""The chain of tests/engine/test_cache_rules.py and tests/e2e/test_get_and_cache.py: every
asset appends its name to executed.log when its body runs."""

CHAIN = """
    from barca import asset, task

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset()
    def a() -> int:
        _ran("a")
        return 1

    @asset(inputs={"a": a})
    def b(a: int) -> int:
        _ran("b")
        return a + 1

    @asset(inputs={"b": b})
    def d(b: int) -> int:
        _ran("d")
        return b * 10

    @asset(inputs={"a": a})
    def c(a: int) -> int:
        _ran("c")
        return a + 100

    @task(inputs={"b": b})
    def publish(b: int) -> str:
        _ran("publish")
        return f"published {b}"
"""
