"""Framing shared by the worker and the trusted side: a JSON header plus raw array bytes.

A frame is `<u32 header length><u64 payload length><header JSON><payload>`. Arrays inside the
header are `{"$array": i}` references to `header["$arrays"][i]` = dtype, shape, offset, nbytes.
Nothing is ever unpickled; the reader checks every array's dtype, shape and size before it
builds its own numpy array from the bytes.
"""

import json
import os
import select
import struct
import time
from typing import Any

import numpy as np

_PREFIX = struct.Struct("<IQ")
ALLOWED_DTYPES = frozenset({"float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"})
MAX_HEADER_BYTES = 4 << 20
MAX_NDIM = 8


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed frame."""


class ReadTimeout(Exception):
    pass


class PeerClosed(Exception):
    pass


def encode(obj: Any) -> bytes:
    arrays: list[dict] = []
    chunks: list[bytes] = []
    offset = 0

    def walk(value: Any) -> Any:
        nonlocal offset
        if isinstance(value, np.ndarray):
            data = np.ascontiguousarray(value)
            raw = data.tobytes()
            arrays.append({"dtype": str(data.dtype), "shape": list(data.shape), "offset": offset, "nbytes": len(raw)})
            chunks.append(raw)
            offset += len(raw)
            return {"$array": len(arrays) - 1}
        if isinstance(value, dict):
            return {str(k): walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    header = walk(obj)
    body = json.dumps({"$body": header, "$arrays": arrays}, allow_nan=True).encode()
    payload = b"".join(chunks)
    return _PREFIX.pack(len(body), len(payload)) + body + payload


def _checked_array(meta: Any, payload: memoryview) -> np.ndarray:
    if not isinstance(meta, dict) or set(meta) != {"dtype", "shape", "offset", "nbytes"}:
        raise ProtocolError("malformed array descriptor")
    dtype, shape, offset, nbytes = meta["dtype"], meta["shape"], meta["offset"], meta["nbytes"]
    if dtype not in ALLOWED_DTYPES:
        raise ProtocolError(f"array dtype {dtype!r} is not allowed")
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_NDIM
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
    ):
        raise ProtocolError(f"bad array shape {shape!r}")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (offset, nbytes)):
        raise ProtocolError("bad array offset or size")
    expected = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if expected != nbytes or offset + nbytes > len(payload):
        raise ProtocolError(f"array of shape {shape} and dtype {dtype} does not fit its {nbytes} bytes")
    return np.frombuffer(payload[offset : offset + nbytes], dtype=dtype).reshape(shape).copy()


def decode(body: bytes, payload: bytes) -> Any:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError(f"header is not JSON: {e}") from None
    if not isinstance(doc, dict) or set(doc) != {"$body", "$arrays"} or not isinstance(doc["$arrays"], list):
        raise ProtocolError("header lacks $body/$arrays")
    view = memoryview(payload)
    arrays = [_checked_array(m, view) for m in doc["$arrays"]]

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"$array"}:
                index = value["$array"]
                if not isinstance(index, int) or not 0 <= index < len(arrays):
                    raise ProtocolError("bad array reference")
                return arrays[index]
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(doc["$body"])


def write_frame(fd: int, obj: Any) -> None:
    data = memoryview(encode(obj))
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    parts, remaining = [], n
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ReadTimeout()
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise PeerClosed()
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


def read_frame(fd: int, deadline: float | None = None, max_payload: int = 1 << 40) -> Any:
    header_len, payload_len = _PREFIX.unpack(_read_exact(fd, _PREFIX.size, deadline))
    if header_len > MAX_HEADER_BYTES:
        raise ProtocolError(f"reply header of {header_len} bytes is over the {MAX_HEADER_BYTES} byte cap")
    if payload_len > max_payload:
        raise ProtocolError(f"reply of {payload_len} bytes is over the {max_payload} byte cap")
    body = _read_exact(fd, header_len, deadline)
    payload = _read_exact(fd, payload_len, deadline)
    return decode(body, payload)
