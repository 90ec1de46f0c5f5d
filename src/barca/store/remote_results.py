"""What a remote artifact store can say about one result beyond its bytes: a signed link to
it (`barca get -o url`, `barca.signed_url`), and whether this machine's copy and the store's
object agree (`barca status`'s `unsynced`).

Both ask the store only for listings of node directories (one per node and process, see
`RemoteStore.stored`), never one request per key: signing is computed locally by the file
system (S3 SigV4, GCS V4, Azure SAS), and a copy is compared by size, as the listing gives it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from barca.errors import InfraError, UsageError
from barca.store.packs import file_of, is_packed

DEFAULT_EXPIRES = 3600  # seconds a link is good for unless told
MAX_EXPIRES = 7 * 24 * 3600  # the longest S3 SigV4 allows
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: Any) -> int | None:
    """Seconds from `30m`, `12h`, `7d`, `0` or a number of seconds; None for anything else."""
    match = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", str(text))
    return None if match is None else int(match[1]) * _UNITS[match[2]]


def expires_seconds(text: Any, where: str = "--expires") -> int:
    """Seconds from `30m`, `12h`, `7d` or a number of seconds, at most seven days."""
    seconds = duration_seconds(text) or 0
    if not 0 < seconds <= MAX_EXPIRES:
        raise UsageError(f"{where} {text!r} is not a duration of one second to seven days",
                         f"give seconds or a number with m, h or d: {where} 30m, 12h, 7d")
    return seconds


def check_signable(remote: Any) -> None:
    """Exit 2 naming the fix unless `remote` (a remote_config.Remote, or None for none) is an
    object store, which can sign links (a shared directory has none to sign)."""
    if remote is None:
        raise UsageError("signed links are to results in a remote store, and this project has "
                         "none", 'set [remote] uri = "s3://bucket/prefix" in barca.toml (or '
                         "BARCA_REMOTE_URI; barca docs remote), or print the local file with "
                         "-o path")
    if remote.protocol == "file":
        raise UsageError(f"the store {remote.uri} is a shared directory, which cannot sign "
                         "links", "read the file on the shared mount (-o path), or share "
                         "results through an object store: s3://, gs:// or abfs://")


def result_key(store: Any, uri: str, artifacts_dir: Path) -> str:
    """The store key `uri` names: a result's place in the store (`<uri>/<env>/artifacts/<key>`)
    or the path of its local copy under `artifacts_dir` (exit 2 for anything else)."""
    prefix = f"{store.remote.uri}/{store.env}/artifacts/"
    if uri.startswith(prefix):
        return uri[len(prefix):]
    if "://" not in uri:
        try:
            return Path(os.path.abspath(uri)).relative_to(artifacts_dir.resolve()).as_posix()
        except ValueError:
            pass
    raise UsageError(f"{uri!r} is not a result of this project's store",
                     f"give {prefix}<file>, or a result's path under {artifacts_dir} (as barca "
                     "get TARGET -o path prints it)")


def signed_url(store: Any, key: str, expires: int) -> str:
    """A link that downloads the result `key` from the store for `expires` seconds (exit 3
    when the store has no object for it, or cannot sign one)."""
    check_signable(getattr(store, "remote", None))
    where = f"{store.remote.uri}/{store.env}/artifacts/{key}"
    if is_packed(key):
        raise InfraError(f"{where} is packed with other keys' small results in one object, "
                         "and a link would give them all",
                         "read its value instead: barca get ... -o value, or barca.get()")
    found = store.stored(file_of(key))
    if found is None:
        raise InfraError(f"the result {where} is not in the store",
                         "compute it with a [remote] set (results recorded before it was set "
                         "are not uploaded): barca get TARGET --refresh TARGET")
    try:
        return _signer(store).sign(found[0], expiration=expires)
    except NotImplementedError:
        raise InfraError(f"the store {store.remote.uri} cannot sign links",
                         "use an s3://, gs:// or abfs:// store, or -o path") from None
    except Exception as exc:  # noqa: BLE001 (each file system has its own errors)
        raise InfraError(f"the store {store.remote.uri} failed to sign a link to {where}: "
                         f"{type(exc).__name__}: {exc}",
                         "check the credentials and storage options (barca docs remote)"
                         ) from None


def unsynced(store: Any, key: str) -> str | None:
    """Why this machine's copy of the result `key` and the store's object disagree
    (`local_only`: not uploaded, `store_only`: not fetched, `mismatch`: sizes differ), or
    None when they agree or the project has no remote store."""
    if getattr(store, "remote", None) is None:
        return None
    file_key = file_of(key)
    local = f"{store.local.dir}/{file_key}"
    try:
        size = os.path.getsize(local)
    except OSError:
        size = None
    found = store.stored(file_key)
    if found is None:
        return "local_only" if size is not None else None
    if size is None:
        return "store_only"
    return "mismatch" if found[1] is not None and found[1] != size else None


def _signer(store: Any) -> Any:
    """The file system that signs the store's links: its own, except that S3 signs with
    SigV4 (botocore may pick the older SigV2, whose links have no seven-day limit and which
    newer regions refuse)."""
    if store.remote.protocol not in ("s3", "s3a"):
        return store.fs
    from fsspec.core import url_to_fs

    options = dict(store.remote.options)
    options["config_kwargs"] = {**options.get("config_kwargs", {}), "signature_version": "s3v4"}
    return url_to_fs(store.remote.uri, skip_instance_cache=True, **options)[0]
