"""`barca sql QUERY --server URL`: the views located by the server (`GET /sql/views`: which
stored file each node's view reads, under the server's project root, `GET /project`), the
query run here by DuckDB over those files, printed as `barca sql` prints it. The server never
runs SQL (it would be file access for whoever reaches it); the files must be readable from
this machine (the server's own, or a shared directory), else exit 3 naming one.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from barca.cli.output import bounded, choose_mode
from barca.cli.sql import DEFAULT_ROWS, print_rows, producer_hint
from barca.errors import InfraError
from barca.printable import note
from barca.server_client import answer
from barca.store.local_files import read_stored, write_bytes
from barca.store.packs import is_packed
from barca.store.sql_views import Source, clash_warning, run_query


def remote_sql(client, params: dict[str, Any]) -> int:
    mode = choose_mode(params["json_flag"], params["pretty"])
    rows_shown = bounded(params["limit"], params["all_rows"], DEFAULT_ROWS)
    files = list(params["files"])
    root = Path(answer(client.get("/project"))["root"])
    found = answer(client.get("/sql/views", params={"files": ",".join(files)} if files
                              else {}))
    clashes = sorted(n for d in found["duplicates"] for n in d["ids"])
    if clashes:
        note(clash_warning(clashes))
    hint = producer_hint(files, params["env_name"])
    with tempfile.TemporaryDirectory(prefix="barca-sql-") as folder:
        sources = [_source(view, root, Path(folder)) for view in found["views"]]
        sources += [Source(m["name"], m["node"], m["node"].rpartition(":")[2], m["kind"], (),
                           m["reason"]) for m in found["missing"]]
        columns, rows, total = run_query(params["query"], sources, rows_shown, hint,
                                         [root / ".barca", Path(folder)])
    print_rows(mode, columns, rows, total)
    return 0


def _source(view: dict, root: Path, folder: Path) -> Source:
    """A view's files, where DuckDB reads them here: the server's files in place, a packed
    result copied to a file of its own in `folder`."""
    files = []
    for number, item in enumerate(view["files"]):
        path = str(root / item["path"])
        try:
            if is_packed(item["path"]):
                copy = str(folder / f"r{number}")
                write_bytes(read_stored(path), copy)
                path = copy
            elif not Path(path).is_file():
                raise FileNotFoundError(path)
        except OSError:
            raise InfraError(f"the server's result {path} of '{view['name']}' is not readable "
                             "on this machine", "run `barca sql` on the server's machine, or "
                             "query from one that shares its project directory") from None
        fmt = view["format"] if view["format"] != "mixed" else \
            Path(item["path"].partition("@")[0]).suffix.lstrip(".")
        files.append((item["partition"], path, fmt))
    return Source(view["name"], view["node"], view["node"].rpartition(":")[2], view["kind"],
                  tuple(files))
