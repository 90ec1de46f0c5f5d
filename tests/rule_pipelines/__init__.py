"""Pipeline sources (and their small helpers) that a driver-level rules file in tests/engine/
and its end-to-end counterpart in tests/e2e/ both run: one copy, so that the rule the driver
checks and the subset a real worker checks are the same pipeline.

Imported as `from rule_pipelines.keyed import CHAIN`: tests/ is on sys.path because
tests/conftest.py lives there (pytest's default `prepend` import mode puts a conftest's folder
first), in a full run, under xdist and for a single file alike. Not named `pipelines`: tests
write projects with a `pipelines/` package of their own, which an in-process command would
then find already imported as this one.
"""
