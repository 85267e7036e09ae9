"""The frame reader trusts nothing: every malformed frame is refused before an array is built."""

import json
import os
import struct

import numpy as np
import pytest

from graders.execution.worker.protocol import ProtocolError, decode, encode, read_frame, write_frame


def _frame(header: dict, payload: bytes = b"") -> tuple[bytes, bytes]:
    return json.dumps(header).encode(), payload


def test_round_trip_keeps_arrays_exact():
    obj = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": [np.array([1, 2], dtype=np.int64), 3], "c": "x"}
    r, w = os.pipe()
    write_frame(w, obj)
    got = read_frame(r, None)
    assert np.array_equal(got["a"], obj["a"]) and got["a"].dtype == np.float32
    assert np.array_equal(got["b"][0], obj["b"][0]) and got["b"][1] == 3 and got["c"] == "x"


@pytest.mark.parametrize("meta, message", [
    ({"dtype": "object", "shape": [1], "offset": 0, "nbytes": 8}, "not allowed"),
    ({"dtype": "float32", "shape": [4], "offset": 0, "nbytes": 8}, "does not fit"),
    ({"dtype": "float32", "shape": [2], "offset": 4, "nbytes": 8}, "does not fit"),
    ({"dtype": "float32", "shape": [-2], "offset": 0, "nbytes": 8}, "bad array shape"),
    ({"dtype": "float32", "shape": [2], "offset": 0, "nbytes": 8, "extra": 1}, "malformed"),
])
def test_bad_array_descriptors_are_refused(meta, message):
    body, payload = _frame({"$body": {"$array": 0}, "$arrays": [meta]}, b"\0" * 8)
    with pytest.raises(ProtocolError, match=message):
        decode(body, payload)


def test_pickles_are_just_bytes():
    import pickle
    body, payload = _frame({"$body": pickle.dumps(object).hex(), "$arrays": []})
    assert isinstance(decode(body, payload), str)
    with pytest.raises(ProtocolError):
        decode(pickle.dumps({"a": 1}), b"")


def test_oversized_replies_are_refused_before_reading():
    r, w = os.pipe()
    os.write(w, struct.pack("<IQ", 10, 1 << 40))
    with pytest.raises(ProtocolError, match="over the"):
        read_frame(r, None, max_payload=1 << 20)


def test_encode_decode_reference_to_missing_array():
    body, payload = _frame({"$body": {"$array": 3}, "$arrays": []})
    with pytest.raises(ProtocolError, match="bad array reference"):
        decode(body, payload)
