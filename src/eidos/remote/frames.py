"""The data plane's wire format: one 32-byte little-endian header per frame, then `length` payload bytes.

Headers come from the network, so `parse` trusts nothing: every field is checked and a bad one raises
FrameError naming the field and its value (the connection that sent it is then closed, nothing else).
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from eidos.errors import ExecutionError

MAGIC = b"EIDF"
VERSION = 1
HEADER = struct.Struct("<4sBBHQQQ")
HEADER_SIZE = HEADER.size
_pack, _unpack = HEADER.pack, HEADER.unpack
TICKET_SIZE = 32
_U64 = 2**64


class Kind(enum.IntEnum):
    HELLO = 1     # payload: the 32-byte channel ticket
    PUT = 2       # ident: transfer id chosen by the client; payload: the bytes
    GET = 3       # ident: handle id
    DATA = 4      # reply to GET: ident the handle id; payload: the bytes
    ACK = 5       # ident: the PUT or RELEASE acknowledged (0: the HELLO); arg: bytes stored
    ERROR = 6     # ident: the id it concerns or 0; payload: UTF-8 JSON {"error": class name, "message": text}
    RELEASE = 7   # ident: handle id
    BYE = 8


_KINDS = {k.value: k for k in Kind}
_NO_PAYLOAD = frozenset({Kind.GET, Kind.RELEASE, Kind.BYE, Kind.ACK})


class FrameError(ExecutionError):
    """A frame header that is not a valid frame; names the field and its value."""


class Frame(NamedTuple):
    """A parsed header (a tuple: made once per frame on the hot path, so cheaper than a dataclass)."""

    kind: Kind
    ident: int
    arg: int = 0
    length: int = 0
    flags: int = 0


def pack(frame: Frame) -> bytes:
    """The 32-byte header of `frame` (its payload, if any, is sent after it by the caller)."""
    for field in ("ident", "arg", "length"):
        value = getattr(frame, field)
        if not 0 <= value < _U64:
            raise FrameError(f"frame {field} {value} is out of range; it must be in 0..2**64-1")
    if not 0 <= frame.flags < 2**16:
        raise FrameError(f"frame flags {frame.flags} is out of range; it must be in 0..65535")
    return HEADER.pack(MAGIC, VERSION, int(frame.kind), frame.flags, frame.ident, frame.arg, frame.length)


def header(kind: Kind, ident: int, arg: int = 0, length: int = 0) -> bytes:
    """`pack(Frame(kind, ident, arg, length))` without building the Frame: the hot path's header."""
    try:
        return _pack(MAGIC, VERSION, kind, 0, ident, arg, length)
    except struct.error:
        return pack(Frame(kind, ident, arg, length))     # out of range: pack names the field


def parse(header: bytes | bytearray | memoryview, *, max_length: int) -> Frame:
    """The Frame in a 32-byte header, validated: FrameError names the first field that is wrong."""
    if len(header) != HEADER_SIZE:
        raise FrameError(f"frame header is {len(header)} bytes; a header is {HEADER_SIZE} bytes")
    magic, version, kind, flags, ident, arg, length = _unpack(header)
    known = _KINDS.get(kind)
    if magic == MAGIC and version == VERSION and known is not None and not flags and length <= max_length and \
            (length == 0 or known not in _NO_PAYLOAD) and (known is not Kind.HELLO or length == TICKET_SIZE):
        return Frame(known, ident, arg, length, 0)       # the usual case, in one test; else say what is wrong
    if magic != MAGIC:
        raise FrameError(f"frame magic is {magic!r}; expected {MAGIC!r} (not an eidos data channel peer?)")
    if version != VERSION:
        raise FrameError(f"frame version is {version}; this side speaks version {VERSION}")
    if kind not in _KINDS:
        raise FrameError(f"frame kind is {kind}; kinds are {', '.join(f'{k.name}={k.value}' for k in Kind)}")
    kind = _KINDS[kind]
    if flags != 0:
        raise FrameError(f"frame flags is {flags:#x} for {kind.name}; no kind defines flags, they must be 0")
    if length > max_length:
        raise FrameError(f"frame length is {length} bytes for {kind.name}; the limit is {max_length} bytes")
    if kind in _NO_PAYLOAD and length != 0:
        raise FrameError(f"frame length is {length} for {kind.name}, which carries no payload; it must be 0")
    if kind is Kind.HELLO and length != TICKET_SIZE:
        raise FrameError(f"frame length is {length} for HELLO; it carries the {TICKET_SIZE}-byte ticket")
    return Frame(kind, ident, arg, length, flags)

