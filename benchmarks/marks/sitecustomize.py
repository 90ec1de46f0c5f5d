"""Timing marks inside every barca process of a tick, for benchmarks/tick_marks.py.

Put this directory first on PYTHONPATH and name functions in BARCA_MARKS
("module:Qualified.name,..."): each is wrapped when its module is first imported (so that
`from module import name` elsewhere gets the wrapped one), and every call appends one line
"pid name start end cpu faults" to BARCA_MARKS_DIR/<pid>: wall clock from CLOCK_MONOTONIC (one
clock for all processes), CPU and minor page faults (pages mapped afresh) of the calling thread. Forked workers open a file of their
own. Nothing happens without BARCA_MARKS; it never ships with barca.
"""

import functools
import importlib.abc
import os
import resource
import sys
import time

_SPEC = os.environ.get("BARCA_MARKS")


def _install(spec: str, directory: str) -> None:
    wanted: dict[str, list[str]] = {}
    for item in spec.split(","):
        module, _, qualified = item.strip().partition(":")
        wanted.setdefault(module, []).append(qualified)
    files: dict[int, int] = {}  # pid -> fd: a forked child must not write to its parent's

    def faults() -> int:
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt

    def emit(name: str, start: float, end: float, cpu: float, pages: int) -> None:
        pid = os.getpid()
        fd = files.get(pid)
        if fd is None:
            fd = files[pid] = os.open(os.path.join(directory, str(pid)),
                                      os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, f"{pid} {name} {start:.6f} {end:.6f} {cpu:.6f} {pages}\n".encode())

    def wrap(fn, name: str):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            start, cpu, pages = time.monotonic(), time.thread_time(), faults()
            try:
                return fn(*args, **kwargs)
            finally:
                emit(name, start, time.monotonic(), time.thread_time() - cpu, faults() - pages)
        return timed

    def patch(module) -> None:
        for qualified in wanted.get(module.__name__, ()):
            *path, last = qualified.split(".")
            owner = module
            for part in path:
                owner = getattr(owner, part)
            fn = owner.__dict__[last] if isinstance(owner, type) else getattr(owner, last)
            if isinstance(fn, (staticmethod, classmethod)):
                setattr(owner, last, type(fn)(wrap(fn.__func__, f"{module.__name__}:{qualified}")))
            else:
                setattr(owner, last, wrap(fn, f"{module.__name__}:{qualified}"))

    class Loader(importlib.abc.Loader):
        def __init__(self, inner) -> None:
            self.inner = inner

        def create_module(self, spec):
            return self.inner.create_module(spec)

        def exec_module(self, module) -> None:
            self.inner.exec_module(module)
            patch(module)

        def __getattr__(self, name):  # get_code and the rest: runpy asks for them
            return getattr(self.inner, name)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in wanted:
                return None
            for finder in sys.meta_path:
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(name, path, target)
                    if spec is not None:
                        spec.loader = Loader(spec.loader)
                        return spec
            return None

    sys.meta_path.insert(0, Finder())
    for name in wanted:
        if name in sys.modules:
            patch(sys.modules[name])


if _SPEC:
    _install(_SPEC, os.environ.get("BARCA_MARKS_DIR", "."))
