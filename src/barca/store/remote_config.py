"""Which remote artifact store a project shares, if any: `BARCA_REMOTE_URI` (an empty value is
unset) over `[remote] uri` in barca.toml, and the fsspec options to open it with,
`BARCA_STORAGE_OPTIONS` (a JSON object) key by key over `[remote.storage_options]` (whose
sub-tables named by a scheme or extra, `[remote.storage_options.s3]`, apply to that one).
Credentials and endpoints come from each library's own variables (AWS_ACCESS_KEY_ID,
AWS_ENDPOINT_URL, GOOGLE_APPLICATION_CREDENTIALS, FSSPEC_S3_*...), which barca never reads.

A URI whose file system package is not installed is exit 2 naming the extra that installs it,
before anything runs; so is a scheme barca does not share results through. That check finds
the package without importing it: s3fs and its async HTTP stack take a few tenths of a second
to import, paid only by a process that makes a request (store.remote_store opens the file
system on its first one).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from barca.config import CONFIG_FILE, Settings
from barca.errors import UsageError

# scheme -> the extra of barca that installs its fsspec file system ("" : fsspec's own)
_SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "abfs": "azure",
            "abfss": "azure", "az": "azure", "file": ""}
# extra -> the package that implements its file system (fsspec's registry names the same)
_PACKAGES = {"s3": "s3fs", "gcs": "gcsfs", "azure": "adlfs", "": "fsspec"}


@dataclass(frozen=True, slots=True)
class Remote:
    uri: str  # as configured, without a trailing "/"
    protocol: str
    options: dict[str, Any] = field(default_factory=dict)
    source: str = "[remote] uri"  # or BARCA_REMOTE_URI


def remote_of(settings: Settings) -> Remote | None:
    """The remote store the project's settings and the environment name; None for none."""
    uri = os.environ.get("BARCA_REMOTE_URI") or None
    source = "BARCA_REMOTE_URI"
    if uri is None:
        uri, source = settings.remote_uri, "[remote] uri"
    if uri is None:
        return None
    protocol = uri.split("://", 1)[0].lower() if "://" in uri else ""
    extra = _SCHEMES.get(protocol)
    if extra is None:
        raise UsageError(f"{source}: cannot share results through {uri!r}",
                         "use s3://bucket/prefix, gs://bucket/prefix, abfs://container/prefix "
                         "or file:///a/shared/directory")
    _check_installed(protocol, extra, source)
    table = settings.remote_storage_options or {}
    scoped = set(_SCHEMES) | set(_SCHEMES.values())  # sub-tables, not options
    options = {k: v for k, v in table.items() if k not in scoped}
    for name in dict.fromkeys((protocol, extra)):  # [remote.storage_options.s3] and the like
        options.update(table.get(name) or {})
    options.update(_env_options())
    return Remote(uri.rstrip("/"), protocol, options, source)


def _check_installed(protocol: str, extra: str, source: str) -> None:
    """Exit 2 unless fsspec and the scheme's package are installed (found, not imported)."""
    from importlib.util import find_spec

    for package in dict.fromkeys(("fsspec", _PACKAGES[extra])):
        if find_spec(package) is None:
            raise not_installed(protocol, source, package)


def not_installed(protocol: str, source: str, why: object) -> UsageError:
    """The exit 2 of a scheme whose file system package is missing (or fails to import)."""
    extra = _SCHEMES.get(protocol, "")
    return UsageError(f"{source}: {protocol}:// needs a package that is not installed ({why})",
                      f"pip install 'barca[{extra}]'" if extra else
                      "pip install fsspec (or an extra that brings it: pip install 'barca[s3]')")


def _env_options() -> dict[str, Any]:
    text = os.environ.get("BARCA_STORAGE_OPTIONS") or ""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise UsageError("BARCA_STORAGE_OPTIONS must be a JSON object of fsspec options",
                         'set it like BARCA_STORAGE_OPTIONS=\'{"endpoint_url": '
                         f'"http://127.0.0.1:9000"}}\', or use [remote.storage_options] in '
                         f"{CONFIG_FILE}")
    return value


def client_options(remote: Remote) -> dict[str, Any]:
    """The storage options, with S3's client trying each request once unless they say how
    it retries: barca retries (store.remote_store `_call`), within its budget."""
    options = dict(remote.options)
    if remote.protocol in ("s3", "s3a"):
        config = options.get("config_kwargs") or {}
        if "retries" not in config:
            options["config_kwargs"] = {**config, "retries": {"total_max_attempts": 1}}
    return options
