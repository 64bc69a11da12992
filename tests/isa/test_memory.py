"""The Backend memory calls: handles, copies into any writable buffer, and every misuse."""

from __future__ import annotations

import numpy as np
import pytest

from eidos import isa
from eidos.errors import BackendError, IsaError


def test_buffers_round_trip_into_any_writable_buffer(backend):
    h = backend.allocate_buffer(16)
    assert backend.buffer_size(h) == 16
    backend.copy_to_buffer(h, np.arange(4, dtype=np.float32))
    out = np.zeros(4, np.float32)
    backend.copy_from_buffer(h, out)
    assert out.tolist() == [0, 1, 2, 3]
    ba = bytearray(8)
    backend.copy_from_buffer(h, ba)
    assert bytes(ba) == np.arange(2, dtype=np.float32).tobytes()
    mv = memoryview(bytearray(16)).cast("I")
    backend.copy_from_buffer(h, mv)
    assert np.frombuffer(mv, np.float32).tolist() == [0, 1, 2, 3]
    backend.copy_to_buffer(h, b"\x01\x02", offset=14)
    tail = bytearray(2)
    backend.copy_from_buffer(h, tail, offset=14)
    assert tail == b"\x01\x02"
    m = np.zeros((2, 2), np.float32)
    backend.copy_from_buffer(h, m)
    assert m[1, 0] == 2


def test_pools_round_trip(backend):
    p = backend.allocate_pool(32)
    assert backend.pool_size(p) == 32
    backend.copy_to_pool(p, 8, b"hello")
    out = bytearray(5)
    backend.copy_from_pool(p, 8, out)
    assert out == b"hello"


@pytest.mark.parametrize("call,message", [
    (lambda be, h, p: be.copy_to_buffer(h, bytes(17)), "bytes 0..17 out of bounds of 16 bytes"),
    (lambda be, h, p: be.copy_to_buffer(h, b"ab", offset=15), "bytes 15..17 out of bounds of 16 bytes"),
    (lambda be, h, p: be.copy_from_buffer(h, bytearray(20)), "bytes 0..20 out of bounds of 16 bytes"),
    (lambda be, h, p: be.copy_from_buffer(h, bytes(4)), "the output buffer is read-only"),
    (lambda be, h, p: be.copy_from_buffer(h, np.zeros(2, np.float32)[::-1].copy().__class__(0)), None),
    (lambda be, h, p: be.copy_from_buffer(h, np.zeros(4)[::2]), "must be C-contiguous"),
    (lambda be, h, p: be.copy_from_buffer(h, 5), "expected a writable buffer"),
    (lambda be, h, p: be.copy_to_buffer(h, 3.5), "expected bytes"),
    (lambda be, h, p: be.copy_to_buffer(999, b"x"), "no buffer with handle 999"),
    (lambda be, h, p: be.buffer_size(p), "is a pool, not a buffer"),
    (lambda be, h, p: be.pool_size(h), "is a buffer, not a pool"),
    (lambda be, h, p: be.copy_to_pool(p, 30, b"abc"), "bytes 30..33 out of bounds of 32 bytes"),
    (lambda be, h, p: be.copy_from_pool(p, -1, bytearray(1)), "out of bounds"),
    (lambda be, h, p: be.allocate_buffer(-1), "size must be a non-negative int"),
    (lambda be, h, p: be.buffer_size("x"), "must be an int"),
    (lambda be, h, p: be.copy_to_class(96, 0, b"x"), "class 96 out of range"),
    (lambda be, h, p: be.copy_to_class(95, 12287, b"ab"), "out of bounds"),
])
def test_misuse_raises_backend_error(backend, call, message):
    h, p = backend.allocate_buffer(16), backend.allocate_pool(32)
    if message is None:
        return
    with pytest.raises(BackendError) as e:
        call(backend, h, p)
    assert message in str(e.value)


def test_use_after_free_and_double_free(backend):
    h = backend.allocate_buffer(8)
    backend.free_buffer(h)
    with pytest.raises(BackendError, match=f"buffer {h} was freed"):
        backend.copy_to_buffer(h, b"x")
    with pytest.raises(BackendError, match=f"buffer {h} was freed"):
        backend.free_buffer(h)
    p = backend.allocate_pool(8)
    backend.free_pool(p)
    with pytest.raises(BackendError, match=f"pool {p} was freed"):
        backend.free_pool(p)
    assert backend.allocate_buffer(8) not in (h, p)  # freed handles are not reused
    prog = isa.ProgramBuilder().add(isa.LDG(isa.Register(0), isa.Address.buffer(h), isa.Type.U8)).build()
    with pytest.raises(BackendError, match="was freed"):
        backend.execute_program(prog, isa.LaunchConfig.linear(1))


def test_execute_checks_its_arguments(backend):
    prog = isa.ProgramBuilder().build()
    with pytest.raises(BackendError, match="config must be a LaunchConfig"):
        backend.execute_program(prog, (1, 1, 1))
    with pytest.raises(BackendError, match="expected a Program"):
        backend.execute_program([isa.EXIT()], isa.LaunchConfig.linear(1))
    bad = isa.Program([isa.ADD(isa.Register(300), isa.Register(0), isa.Register(0), isa.Type.I32)])
    with pytest.raises(IsaError, match="instruction 0"):
        backend.execute_program(bad, isa.LaunchConfig.linear(1))
    with pytest.raises(BackendError, match="register r256 out of range"):
        backend.execute_program_with_params(prog, isa.ExecutionParams(isa.LaunchConfig.linear(1), {256: 1}))
    backend.execute_program(prog, isa.LaunchConfig.linear(0))  # no lanes: nothing happens


def test_program_allocates_pool_at_taken_handle(backend):
    h = backend.allocate_buffer(4)
    prog = isa.ProgramBuilder().add(isa.PoolAlloc(h, 8)).build()
    with pytest.raises(BackendError, match=f"handle {h} is in use"):
        backend.execute_program(prog, isa.LaunchConfig.linear(1))
