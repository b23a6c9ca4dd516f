"""mp_hand.py -- a small hand-written msgpack encoder for the golden vectors'
invalid bytes that the PyPI msgpack package will not produce: bad UTF-8 in
a str, duplicate or odd keys, integers forced into a given width, float32,
bytes copied verbatim (gen_vectors.py's error vectors).
"""
import struct

import msgpack


class Pairs(list):
    """A map given as (key, value) pairs: allows duplicate or odd keys."""


class RawStr(bytes):
    """A msgpack str whose payload is these bytes (may be invalid UTF-8)."""


class Raw(bytes):
    """Bytes copied verbatim into the output."""


class Int:
    """An integer forced into a given msgpack format byte."""
    FMT = {0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q",
           0xd0: ">b", 0xd1: ">h", 0xd2: ">i", 0xd3: ">q"}

    def __init__(self, value, fmt):
        self.value, self.fmt = value, fmt


class F32(float):
    """A float packed as float32."""


def _str_head(n):
    if n < 32:
        return bytes([0xa0 | n])
    if n < 256:
        return bytes([0xd9, n])
    if n < 65536:
        return b"\xda" + struct.pack(">H", n)
    return b"\xdb" + struct.pack(">I", n)


def _count_head(n, fix, c16, c32):
    if n < 16:
        return bytes([fix | n])
    if n < 65536:
        return bytes([c16]) + struct.pack(">H", n)
    return bytes([c32]) + struct.pack(">I", n)


def mp(o):
    """Encode o; Pairs/RawStr/Raw/Int/F32 give bytes msgpack won't."""
    if isinstance(o, Raw):
        return bytes(o)
    if isinstance(o, RawStr):
        return _str_head(len(o)) + bytes(o)
    if isinstance(o, Int):
        return bytes([o.fmt]) + struct.pack(Int.FMT[o.fmt], o.value)
    if isinstance(o, F32):
        return b"\xca" + struct.pack(">f", o)
    if isinstance(o, Pairs):
        return _count_head(len(o), 0x80, 0xde, 0xdf) + b"".join(
            mp(k) + mp(v) for k, v in o)
    if isinstance(o, dict):
        return mp(Pairs(o.items()))
    if isinstance(o, list):
        return _count_head(len(o), 0x90, 0xdc, 0xdd) + b"".join(
            mp(x) for x in o)
    if isinstance(o, str):
        return mp(RawStr(o.encode()))
    return msgpack.packb(o)
