"""`barca doctor` with a `[remote]`: the shared store is reached, takes the credentials, can
be written (a probe object, removed after) and listed, over moto's S3 server on loopback;
each failure is named with its fix. Without a store, doctor says nothing of one.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from conftest import Moto, barca, require_moto, write

require_moto()

PLAIN = """
from barca import asset

@asset
def numbers() -> list:
    return list(range(10))
"""


def _store_check(result) -> dict:
    [check] = [c for c in result.json["checks"] if c["name"] == "store"]
    return check


def test_doctor_checks_a_working_store_and_leaves_nothing_in_it_and_no_store_without_one(tmp_path: Path,
                                                                moto: Moto) -> None:
    bucket = moto.bucket()
    root = write(tmp_path / "p", {"pipeline.py": PLAIN,
                                  "barca.toml": f'[remote]\nuri = "s3://{bucket}/team"\n'})
    barca(root, "get", "numbers", "pipeline.py", env=moto.env).expect(0)
    moto.taken()
    check = _store_check(barca(root, "doctor", "--json", env=moto.env).expect(0))
    assert check["ok"] and check["fix"] is None
    assert check["data"] == {"uri": f"s3://{bucket}/team", "source": "[remote] uri",
                             "env": "default", "protocol": "s3", "reachable": True,
                             "credentials": True, "exists": True, "writable": True,
                             "probe_removed": True, "listing": True, "node_dirs": 1}
    [probe] = [p for m, p in moto.taken() if m == "PUT"]  # the probe, then removed
    assert f"/{bucket}/team/default/.barca-doctor-" in probe
    moto.fs.invalidate_cache()
    assert not [p for p in moto.fs.find(bucket) if ".barca-doctor-" in p]
    # without a store, doctor says nothing of one
    plain = write(tmp_path / "plain", {"pipeline.py": PLAIN, "barca.toml": ""})
    checks = barca(plain, "doctor", env=moto.env).expect(0).json["checks"]
    assert "store" not in [c["name"] for c in checks]


def test_doctor_names_a_missing_bucket_a_dead_endpoint_and_a_bad_uri(tmp_path: Path,
                                                                      moto: Moto) -> None:
    root = write(tmp_path / "p", {"pipeline.py": PLAIN, "barca.toml": ""})
    missing = _store_check(barca(root, "doctor", env={
        **moto.env, "BARCA_REMOTE_URI": "s3://no-such-bucket/x"}).expect(3))
    assert (missing["ok"], missing["detail"]) == (False, "s3://no-such-bucket/x does not exist")
    assert missing["fix"].startswith("create the bucket")
    assert missing["data"]["exists"] is False and missing["data"]["credentials"] is True

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    dead = _store_check(barca(root, "doctor", timeout=120, env={
        **moto.env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed}",
        "BARCA_REMOTE_URI": "s3://anything"}).expect(3))
    assert dead["detail"].startswith("s3://anything does not answer")
    assert dead["fix"].startswith("check the endpoint (AWS_ENDPOINT_URL")
    assert dead["data"]["reachable"] is False

    bad = _store_check(barca(root, "doctor", env={"BARCA_REMOTE_URI": "ftp://host/x"})
                       .expect(3))
    assert bad["detail"].startswith("BARCA_REMOTE_URI: cannot share results through")
    assert bad["fix"].startswith("use s3://bucket/prefix")


def test_doctor_names_refused_credentials_and_a_store_it_cannot_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """moto checks credentials and IAM policies once its first requests (which set up a user
    who may read and list but not write) are spent."""
    import boto3

    monkeypatch.setenv("INITIAL_NO_AUTH_ACTION_COUNT", "4")
    (tmp_path / "moto").mkdir()
    server = Moto(tmp_path / "moto")
    try:
        setup = {"endpoint_url": server.url, "region_name": "us-east-1",
                 "aws_access_key_id": "setup", "aws_secret_access_key": "setup"}
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="reader")
        iam.put_user_policy(UserName="reader", PolicyName="read-only", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
                {"Effect": "Deny", "Action": "s3:PutObject", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        reader = {**server.env, "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
                  "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
                  "BARCA_REMOTE_URI": "s3://read-only/team"}
        boto3.client("s3", endpoint_url=server.url, region_name="us-east-1",
                     aws_access_key_id=key["AccessKeyId"],
                     aws_secret_access_key=key["SecretAccessKey"]).create_bucket(
            Bucket="read-only")
        root = write(tmp_path / "p", {"pipeline.py": PLAIN, "barca.toml": ""})

        readonly = _store_check(barca(root, "doctor", env=reader).expect(3))
        assert readonly["detail"].startswith("cannot write to s3://read-only/team")
        assert "s3:PutObject" in readonly["fix"]
        assert (readonly["data"]["credentials"], readonly["data"]["writable"]) == (True, False)

        wrong = _store_check(barca(root, "doctor", env={
            **reader, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}).expect(3))
        assert wrong["detail"].startswith("s3://read-only/team refused the credentials")
        assert wrong["fix"].startswith("check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
        assert wrong["data"]["credentials"] is False
    finally:
        server.stop()
