"""The one compiled module (everything else is in pyproject.toml).

barca.key_packing sorts and packs a keyed source's dict in C (src/barca/key_packing.c). It is
optional: without a C compiler the install still succeeds and barca packs in Python, with the
same result, slower (`barca doctor` says which).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("barca.key_packing", ["src/barca/key_packing.c"], optional=True)])
