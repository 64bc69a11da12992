"""The data plane's frame header: every field validated, any 32 bytes parse to a Frame or a FrameError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eidos.errors import ExecutionError
from eidos.remote.frames import HEADER_SIZE, MAGIC, TICKET_SIZE, Frame, FrameError, Kind, pack, parse

LIMIT = 1 << 30
_NO_PAYLOAD = {Kind.GET, Kind.RELEASE, Kind.BYE, Kind.ACK}
u64 = st.integers(0, 2**64 - 1)


@st.composite
def frames(draw):
    kind = draw(st.sampled_from(list(Kind)))
    if kind in _NO_PAYLOAD:
        length = 0
    elif kind is Kind.HELLO:
        length = TICKET_SIZE
    else:
        length = draw(st.integers(0, LIMIT))
    return Frame(kind, draw(u64), draw(u64), length)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=HEADER_SIZE, max_size=HEADER_SIZE))
def test_any_32_bytes_parse_to_a_frame_or_a_frame_error(header):
    try:
        frame = parse(header, max_length=LIMIT)
    except FrameError:
        return
    assert isinstance(frame, Frame) and pack(frame) == header


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=4, max_size=4), st.integers(0, 255), st.integers(0, 255), st.integers(0, 65535),
       u64, u64, u64)
def test_headers_near_valid_ones_parse_or_raise_frame_error(magic, version, kind, flags, ident, arg, length):
    """Random bytes rarely pass the magic; these keep it (and version 1) half the time to reach later checks."""
    header = struct.pack("<4sBBHQQQ", MAGIC if magic[0] % 2 else magic, 1 if version % 2 else version, kind % 10,
                         flags if flags % 3 == 0 else 0, ident, arg, length % (2 * LIMIT))
    try:
        frame = parse(memoryview(header), max_length=LIMIT)
    except FrameError:
        return
    assert pack(frame) == header


@settings(max_examples=100, deadline=None)
@given(frames())
def test_pack_parse_round_trip(frame):
    header = pack(frame)
    assert len(header) == HEADER_SIZE
    assert parse(header, max_length=LIMIT) == frame
    assert parse(memoryview(bytearray(header)), max_length=LIMIT) == frame


def _header(kind=Kind.PUT, flags=0, length=0, magic=MAGIC, version=1):
    return struct.pack("<4sBBHQQQ", magic, version, kind, flags, 7, 0, length)


@pytest.mark.parametrize("header, words", [
    (b"\0" * 31, ["31 bytes", "32"]),
    (_header(magic=b"HTTP"), ["magic", "HTTP"]),
    (_header(version=2), ["version is 2"]),
    (_header(kind=9), ["kind is 9", "HELLO=1"]),
    (_header(kind=0), ["kind is 0"]),
    (_header(flags=4), ["flags is 0x4", "PUT"]),
    (_header(length=LIMIT + 1), [f"length is {LIMIT + 1}", f"limit is {LIMIT}"]),
    (_header(kind=Kind.GET, length=1), ["GET", "no payload"]),
    (_header(kind=Kind.ACK, length=8), ["ACK", "no payload"]),
    (_header(kind=Kind.BYE, length=8), ["BYE"]),
    (_header(kind=Kind.RELEASE, length=8), ["RELEASE"]),
    (_header(kind=Kind.HELLO, length=31), ["HELLO", "32-byte ticket"]),
])
def test_a_bad_header_names_the_field_and_its_value(header, words):
    with pytest.raises(FrameError) as info:
        parse(header, max_length=LIMIT)
    assert all(w in str(info.value) for w in words), str(info.value)
    assert isinstance(info.value, ExecutionError)


def test_pack_refuses_fields_out_of_range():
    with pytest.raises(FrameError, match="ident"):
        pack(Frame(Kind.PUT, 2**64))
    with pytest.raises(FrameError, match="length"):
        pack(Frame(Kind.PUT, 1, length=-1))
