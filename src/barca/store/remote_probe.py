"""What `barca doctor` finds of the shared store: whether it answers, takes the credentials,
exists, can be written (a small probe object, removed after) and its results listed, each
failure named with its fix.

Every request is tried once, without the retries of a run: a diagnosis says what happens now,
in seconds, rather than waiting out a transient error.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

PROBE_PREFIX = ".barca-doctor-"


@dataclass(slots=True)
class Probe:
    ok: bool
    detail: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


def probe_project(project: Any, remote: Any) -> Probe:
    """The probe of `remote` (a remote_config.Remote) as the project's runs would open it."""
    from barca.errors import InfraError
    from barca.store.local_store import LocalStore
    from barca.store.remote_store import RemoteStore

    local = LocalStore.of_project(project.root, project.artifacts_dir)
    store = RemoteStore(str(project.root), local.address, remote, project.env)
    try:
        store.fs  # noqa: B018 (opened here, so that options it refuses are the probe's answer)
    except InfraError as exc:
        return Probe(False, exc.message, exc.remediation, {"uri": remote.uri,
                                                           "source": remote.source})
    return probe(store)


def probe(store: Any) -> Probe:
    remote = store.remote
    data: dict[str, Any] = {"uri": remote.uri, "source": remote.source, "env": store.env,
                            "protocol": remote.protocol, "reachable": None,
                            "credentials": None, "exists": None, "writable": None,
                            "probe_removed": None, "listing": None, "node_dirs": None}
    fs = store.fs  # each request tried once (remote_store)
    where = store.top if remote.protocol == "file" else store.top.split("/", 1)[0]
    endpoint = _endpoint_fix(remote)
    try:
        fs.ls(where, detail=False, refresh=True)
    except FileNotFoundError:
        data.update(reachable=True, credentials=True, exists=False)
        return Probe(False, f"{remote.uri} does not exist", "create the bucket (or directory), "
                     f"or fix {remote.source}", data)
    except PermissionError as exc:
        data.update(reachable=True, credentials=False)
        return Probe(False, f"{remote.uri} refused the credentials: {exc}", _credentials_fix(
            remote, "may list the bucket (s3:ListBucket)"), data)
    except Exception as exc:  # noqa: BLE001 (each file system has its own errors)
        if type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
            data.update(credentials=False)
            return Probe(False, f"no credentials for {remote.uri}: {exc}",
                         _credentials_fix(remote, None), data)
        data.update(reachable=False)
        return Probe(False, f"{remote.uri} does not answer: {type(exc).__name__}: {exc}",
                     endpoint, data)
    data.update(reachable=True, credentials=True, exists=True)

    probe_path = f"{store.top}/{store.env}/{PROBE_PREFIX}{secrets.token_hex(6)}"
    try:
        if remote.protocol == "file":
            fs.makedirs(probe_path.rpartition("/")[0], exist_ok=True)
        fs.pipe_file(probe_path, b"barca doctor: a probe object, removed at once\n")
    except Exception as exc:  # noqa: BLE001
        data.update(writable=False)
        return Probe(False, f"cannot write to {remote.uri}: {type(exc).__name__}: {exc}",
                     _credentials_fix(remote, "may write objects (s3:PutObject; GCS Storage "
                                      "Object User; Azure Storage Blob Data Contributor)"), data)
    data.update(writable=True)
    left = None
    try:
        fs.rm(probe_path)
    except Exception as exc:  # noqa: BLE001
        left = f"; its probe object {probe_path} could not be removed ({type(exc).__name__}: " \
            f"{exc}): delete it by hand; barca gc --remote needs delete permission too"
    data["probe_removed"] = left is None

    try:
        found = fs.ls(store.base, detail=False, refresh=True)
    except FileNotFoundError:
        found = []
    except Exception as exc:  # noqa: BLE001
        data.update(listing=False)
        return Probe(False, f"cannot list the results in {remote.uri}/{store.env}/artifacts: "
                     f"{type(exc).__name__}: {exc}", _credentials_fix(
                         remote, "may list the bucket (s3:ListBucket)"), data)
    data.update(listing=True, node_dirs=len(found))
    nodes = f"{len(found)} node director{'y' if len(found) == 1 else 'ies'} of results"
    return Probe(True, f"{remote.uri} ({remote.source}) answers, takes the credentials, "
                 f"can be written and listed: {nodes} in {store.env}/artifacts{left or ''}",
                 data=data)


def _credentials_fix(remote: Any, permission: str | None) -> str:
    s3 = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
    gcs = "GOOGLE_APPLICATION_CREDENTIALS"
    where = {"s3": s3, "s3a": s3, "gs": gcs, "gcs": gcs,
             "file": "the file permissions of the shared directory"}.get(
        remote.protocol, "the account's credentials (AZURE_STORAGE_CONNECTION_STRING, or "
        "account and key)")
    if permission is None:
        return f"set {where}, or credentials in the storage options (barca docs remote)"
    return f"check {where} and that they {permission}"


def _endpoint_fix(remote: Any) -> str:
    if remote.protocol in ("s3", "s3a"):
        return ("check the endpoint (AWS_ENDPOINT_URL, or endpoint_url in the storage "
                "options) and that it is up and reachable from here")
    return f"check that the store is reachable from here, and {remote.source}"
