"""The warm pool's socket messages: typed, JSON, and refused unless every field has its type.
Nothing read from the socket is unpickled or evaluated."""

from __future__ import annotations

import json
import pickle

import pytest

from barca.engine.local.pool_messages import (MESSAGES, ForkWorker, Hello, Reaped, RunCommand,
                                              Status, Welcome, decode, encode)


@pytest.mark.parametrize("message", [
    Hello(), Welcome(["pandas", "duckdb"], 4242),
    ForkWorker("/p", {"HOME": "/root"}, 900.0, [9, 1024, 4096]),
    RunCommand("cli", ["get", "x", "p.py"], "/p/sub", {"A": "1"}, 0o022, 60, []),
    Status(12), Reaped(12, "SIGSEGV"),
])
def test_a_message_comes_back_as_it_was_sent(message):
    assert decode(encode(message)) == message
    assert type(decode(encode(message))) is type(message)


@pytest.mark.parametrize("data", [
    b"",
    b"not json",
    pickle.dumps(("hello",)),
    json.dumps({"type": "Nope"}).encode(),
    json.dumps({"pid": 1}).encode(),  # no type
    json.dumps({"type": "Welcome", "modules": [], "pid": "1"}).encode(),
    json.dumps({"type": "Welcome", "modules": [1], "pid": 1}).encode(),
    json.dumps({"type": "Welcome", "modules": [], "pid": True}).encode(),
    json.dumps({"type": "Welcome", "modules": []}).encode(),  # a field missing
    json.dumps({"type": "Forked", "pid": 1, "extra": 2}).encode(),
    json.dumps({"type": "ForkWorker", "root": "/p", "env": {"A": 1}, "idle": 1.0,
                "limits": []}).encode(),
    json.dumps({"type": "ForkWorker", "root": "/p", "env": {}, "idle": "1",
                "limits": []}).encode(),
    json.dumps({"type": "ForkWorker", "root": "/p", "env": {}, "idle": 1,
                "limits": [1.5]}).encode(),
    json.dumps({"type": "RunCommand", "argv": "get", "cwd": "/", "env": {},
                "umask": 18, "idle": 1, "limits": []}).encode(),
    json.dumps(["Hello"]).encode(),
])
def test_anything_malformed_is_a_value_error(data):
    with pytest.raises(ValueError):
        decode(data)


def test_every_message_type_is_known_by_name():
    assert set(MESSAGES) == {"Hello", "Welcome", "ForkWorker", "RunCommand", "Forked",
                             "Exited", "Status", "Reaped", "Preload", "Refused"}
