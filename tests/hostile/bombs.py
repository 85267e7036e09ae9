"""Zip files no honest tool writes: a 2 GiB deflate bomb (built in well under a second, by hand)
and archives with entries that escape, links, devices and lying headers."""

import struct
import zlib
from pathlib import Path

import numpy as np

TWO_GIB = 1 << 31


def _bits(value: int, width: int, msb_first: bool) -> list[int]:
    order = range(width - 1, -1, -1) if msb_first else range(width)
    return [(value >> i) & 1 for i in order]


def zeros_deflate(size: int) -> bytes:
    """A raw deflate stream that inflates to `size` zero bytes: one fixed-Huffman block holding a
    literal 0 and then (length 258, distance 1) copies, 13 bits per 258 bytes."""
    copies, tail = divmod(size - 1, 258)
    literal0 = _bits(0x30, 8, True)                  # fixed code of literal 0
    copy = _bits(0xC5, 8, True) + _bits(0, 5, True)  # length code 285 (258 bytes), distance code 0 (1)
    head = [1] + _bits(1, 2, False) + literal0        # BFINAL, BTYPE=01 (fixed codes)
    end = literal0 * tail + _bits(0, 7, True)         # the remainder as literals, end of block
    bits = np.concatenate([np.array(head, np.uint8), np.tile(np.array(copy, np.uint8), copies),
                           np.array(end, np.uint8)])
    return np.packbits(bits, bitorder="little").tobytes()


def _crc_of_zeros(size: int) -> int:
    crc, block = 0, bytes(1 << 24)
    while size:
        n = min(size, len(block))
        crc, size = zlib.crc32(block[:n], crc), size - n
    return crc


def raw_zip(path: Path, name: str, data: bytes, size: int, crc: int, method: int = 8, mode: int = 0o100644,
            compressed: int | None = None) -> Path:
    """One entry whose headers say `size` bytes (`compressed` of them stored) with `crc`, holding
    `data` as compressed by `method`."""
    encoded, compressed = name.encode(), len(data) if compressed is None else compressed
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc, compressed, size, len(encoded), 0)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x0314, 20, 0, method, 0, 0, crc, compressed, size,
                          len(encoded), 0, 0, 0, 0, mode << 16, 0)
    offset = len(local) + len(encoded) + len(data)
    directory = central + encoded
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(directory), offset, 0)
    path.write_bytes(local + encoded + data + directory + end)
    return path


def bomb_zip(path: Path, name: str = "model_solution.py", size: int = TWO_GIB, honest: bool = True) -> Path:
    """A deflate bomb of `size` zeros; `honest=False` declares 1 KiB (and its CRC) instead."""
    data = zeros_deflate(size)
    if honest:
        return raw_zip(path, name, data, size, _crc_of_zeros(size))
    return raw_zip(path, name, data, 1024, _crc_of_zeros(1024))
