# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""What the smoke job sends between ranks (issue 25, F12): no pickle, bounded JSON records.

Torch-free: the job's source is read as text and its wire-format functions are imported from the
file the role copies to the nodes.
"""
import ast
import importlib.util
import json
from pathlib import Path

import pytest

JOB = Path(__file__).resolve().parents[3] / "roles" / "smoke_test" / "files" / "gpufleet_smoke.py"
_SPEC = importlib.util.spec_from_file_location("gpufleet_smoke_wire", JOB)
smoke = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(smoke)

MEMBER = {"rank": 3, "local_rank": 1, "node": "gpu-a02", "address": "10.10.0.12", "hostname": "gpu-a02.example",
          "device": "cuda:1", "gpu": "NVIDIA H100 80GB HBM3"}


def _calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            yield func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def test_the_job_uses_no_pickling_collective_and_no_pickle():
    tree = ast.parse(JOB.read_text(encoding="utf-8"))
    names = set(_calls(tree))
    # all_gather_object, broadcast_object_list, gather_object, scatter_object_list, send/recv_object_list...
    assert not [n for n in names if n.endswith(("_object", "_object_list"))], sorted(names)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names} | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"pickle", "cPickle", "dill", "marshal"}, imported
    assert "all_gather" in names  # the records travel as tensors instead


def test_record_round_trip_is_fixed_size():
    encoded = smoke.encode_record(MEMBER)
    assert len(encoded) == smoke.RECORD_BYTES
    assert smoke.decode_record(encoded) == MEMBER
    assert smoke.validate_member(smoke.decode_record(encoded), 3) == MEMBER
    small = smoke.encode_record({"a": 1}, size=16)
    assert len(small) == 16 and smoke.decode_record(small, size=16) == {"a": 1}


def test_a_record_that_does_not_fit_is_refused_when_encoding():
    big = dict(MEMBER, hostname="h" * smoke.RECORD_BYTES)
    with pytest.raises(ValueError, match="does not fit in 1020"):
        smoke.encode_record(big)
    # The largest payload that fits, exactly.
    payload_room = smoke.RECORD_BYTES - 4
    fits = {"x": "y" * (payload_room - len('{"x":""}'))}
    assert smoke.decode_record(smoke.encode_record(fits)) == fits
    with pytest.raises(ValueError, match="does not fit"):
        smoke.encode_record({"x": fits["x"] + "y"})
    with pytest.raises(ValueError):
        smoke.encode_record({"x": float("nan")})  # no NaN on the wire: it is not JSON


def _raw(payload, length=None, size=smoke.RECORD_BYTES):
    length = len(payload) if length is None else length
    return (length.to_bytes(4, "big") + payload).ljust(size, b"\0")[:size]


# name -> (bytes from a peer, what decode_record must say)
BAD_BUFFERS = {
    "short": (b"\0" * 10, "record is 10 bytes, need 1024"),
    "long": (b"\0" * 2048, "record is 2048 bytes, need 1024"),
    "zero_length": (_raw(b"", 0), "record length 0 is outside 1..1020"),
    "length_past_the_end": (_raw(b"{}", 5000), "record length 5000 is outside 1..1020"),
    "trailing_bytes": (_raw(b"{}")[:10] + b"junk".ljust(smoke.RECORD_BYTES - 10, b"\0"),
                       "bytes after its 2-byte payload"),
    "not_utf8": (_raw(b"\xff\xfe{}"), "not UTF-8 JSON"),
    "not_json": (_raw(b"{rank: 0}"), "not UTF-8 JSON"),
    "nan": (_raw(b'{"rank": NaN}'), "non-finite number NaN"),
    "a_list": (_raw(b"[1, 2]"), "record is a list, need an object"),
    "a_pickle": (_raw(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94."), "not UTF-8 JSON"),
}


@pytest.mark.parametrize("name", sorted(BAD_BUFFERS))
def test_bad_bytes_from_a_peer_are_refused(name):
    buf, needle = BAD_BUFFERS[name]
    with pytest.raises(ValueError) as caught:
        smoke.decode_record(buf)
    assert needle in str(caught.value), str(caught.value)


# name -> (record a peer sent for rank 3, what validate_member must say)
BAD_MEMBERS = {
    "missing_field": ({k: v for k, v in MEMBER.items() if k != "gpu"}, "sent fields"),
    "extra_field": (dict(MEMBER, cmd="rm -rf /"), "sent fields"),
    "rank_as_text": (dict(MEMBER, rank="3"), "sent rank='3'"),
    "rank_as_bool": (dict(MEMBER, local_rank=True), "sent local_rank=True"),
    "node_as_list": (dict(MEMBER, node=["a"]), "sent node=['a']"),
    "someone_elses_rank": (dict(MEMBER, rank=0), "rank 3 sent the record of rank 0"),
}


@pytest.mark.parametrize("name", sorted(BAD_MEMBERS))
def test_a_member_record_is_checked_field_by_field(name):
    record, needle = BAD_MEMBERS[name]
    # Through the wire format first: what arrives is what was sent.
    arrived = smoke.decode_record(smoke.encode_record(record))
    with pytest.raises(ValueError) as caught:
        smoke.validate_member(arrived, 3)
    assert needle in str(caught.value), str(caught.value)


def test_a_member_without_gpu_or_address_is_valid():
    cpu = dict(MEMBER, gpu=None, address=None, device="cpu")
    assert smoke.validate_member(json.loads(json.dumps(cpu)), 3) == cpu
