"""Pages of the pool a command wrote, copied ahead by the next spares (engine.local.page_copies).

A fresh interpreter stands for the pool: it holds 100,000 small objects, forks a child that
writes to each (a command) and leaves its list of written pages, then forks children as spares
would be: one copies the listed pages ahead and then writes to the same objects, one does not.
Each reports what it saw; the pool's own objects must be as they were.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

POOL = """
import json, os, resource, sys
from barca.engine.local import page_copies

path = sys.argv[1]
held = [bytearray(64) for _ in range(100_000)]  # the pool's objects, over some 2,000 pages

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

def child(body):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        page_copies.remember_inherited()  # as every spare does first
        os.write(write, json.dumps(body()).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    return json.loads(os.read(read, 1 << 16))

def command():
    for item in held:
        item[0] = 1
    page_copies.leave(path)
    return page_copies.listed(path)

def spare(most):
    copied = page_copies.copy_ahead(path, most, lambda: False)
    before = faults()
    for item in held:
        item[0] = 2
    return [copied, faults() - before]

listed = child(command)
print(json.dumps({"listed": listed, "copied": child(lambda: spare(1 << 20)),
                  "none": child(lambda: spare(0)), "ten": child(lambda: spare(10)),
                  "untouched": sorted({item[0] for item in held})}))
"""


def _kernel_copies() -> bool:
    """MADV_POPULATE_WRITE: Linux 5.14 and later."""
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (5, 14)


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/pagemap is Linux's")
def test_spares_copy_ahead_the_pages_a_command_wrote_and_the_pool_keeps_its_own(tmp_path: Path):
    path = tmp_path / "pool.pages"
    out = subprocess.run([sys.executable, "-c", POOL, str(path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["listed"] > 1_000  # the pages the command wrote, listed for the next spares
    assert seen["untouched"] == [0]  # neither the command's writes nor the copies reach the pool
    copied, after_copies = seen["copied"]
    not_copied, without = seen["none"]
    assert not_copied == 0 and without > 1_000  # a spare told to copy nothing copies nothing
    assert seen["ten"][0] <= 10  # at most as many as it is allowed
    if not _kernel_copies():
        assert copied == 0
        pytest.skip("this kernel cannot copy pages ahead (MADV_POPULATE_WRITE)")
    assert copied > 1_000
    assert after_copies < without / 10  # the writes found their pages copied already


def test_a_missing_or_damaged_list_copies_nothing(tmp_path: Path):
    from barca.engine.local import page_copies

    assert page_copies.copy_ahead(str(tmp_path / "none.pages"), 100, lambda: False) == 0
    damaged = tmp_path / "damaged.pages"
    damaged.write_bytes(b"12345")  # not whole page numbers
    assert page_copies.copy_ahead(str(damaged), 100, lambda: False) == 0
    assert page_copies.listed(str(tmp_path / "none.pages")) == 0
