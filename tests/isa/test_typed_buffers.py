"""Typed buffers (a buffer knows its element type and length) and 64-byte-aligned host allocations."""

from __future__ import annotations

import numpy as np
import pytest

from eidos import isa
from eidos.errors import BackendError, IsaError
from eidos.isa import Address, LaunchConfig, MapOperation, ProgramBuilder, Register, Type

ONE = LaunchConfig.linear(1)


def _abs(dst: Address, src: Address, count: int, ty: Type):
    return ProgramBuilder().add(isa.ParallelMap(dst, src, count, MapOperation.Abs, ty)).build()


def test_a_typed_buffer_knows_its_type_and_length(backend):
    f = backend.allocate_typed(6, Type.F32)
    g = backend.allocate_buffer(16, Type.I16)
    raw = backend.allocate_buffer(10)
    assert (backend.buffer_type(f), backend.buffer_length(f), backend.buffer_size(f)) == (Type.F32, 6, 24)
    assert (backend.buffer_type(g), backend.buffer_length(g)) == (Type.I16, 8)
    assert (backend.buffer_type(raw), backend.buffer_length(raw), backend.buffer_size(raw)) == (None, 10, 10)
    backend.free_buffer(f)
    with pytest.raises(BackendError, match=f"buffer {f} was freed"):
        backend.buffer_type(f)
    with pytest.raises(BackendError, match="not a whole number of F32 elements"):
        backend.allocate_buffer(10, Type.F32)
    with pytest.raises(BackendError, match="ty must be an eidos.isa.Type"):
        backend.allocate_buffer(8, "f32")
    with pytest.raises(BackendError, match="size must be a non-negative int"):
        backend.allocate_typed(-1, Type.F32)


def test_reading_a_typed_buffer_as_another_type_names_instruction_buffer_and_types(backend):
    src = backend.allocate_typed(4, Type.F32)
    dst = backend.allocate_buffer(16)
    with pytest.raises(IsaError) as e:
        backend.execute_program(_abs(Address.buffer(dst), Address.buffer(src), 4, Type.I32), ONE)
    text = str(e.value)
    for part in ("instruction 0 (ParallelMap.I32", f"src_array reads buffer {src} as I32",
                 f"buffer {src} holds F32 elements", f"Address.buffer({src}, 0, reinterpret=True)"):
        assert part in text
    ldg = ProgramBuilder().add(isa.LDG(Register(0), Address.buffer(src, 4), Type.F64)).build()
    with pytest.raises(IsaError, match=f"src reads buffer {src} as F64"):
        backend.execute_program(ldg, ONE)
    stg = ProgramBuilder().add(isa.MOV_IMM(Register(0), 1, Type.U32),
                               isa.STG(Address.buffer(src, 0), Register(0), Type.U32)).build()
    with pytest.raises(IsaError, match=f"instruction 1 .*dst writes buffer {src} as U32"):
        backend.execute_program(stg, ONE)
    inside = ProgramBuilder().add(isa.LDG(Register(0), Address.buffer(src, 2), Type.F32)).build()
    with pytest.raises(IsaError, match="at byte 2, inside element 0 of its F32 elements"):
        backend.execute_program(inside, ONE)


def test_reinterpret_reads_the_bytes_as_asked(backend):
    values = np.array([-1.5, 2.0, -0.0, 3.25], np.float32)
    src = backend.allocate_typed(4, Type.F32)
    dst = backend.allocate_typed(4, Type.I32)
    backend.copy_to_buffer(src, values)
    backend.execute_program(_abs(Address.buffer(dst), Address.buffer(src, reinterpret=True), 4, Type.I32), ONE)
    out = np.zeros(4, np.int32)
    backend.copy_from_buffer(dst, out)
    assert out.tolist() == np.abs(values.view(np.int32)).tolist()


def test_untyped_buffers_keep_raw_bytes(backend):
    src, dst = backend.allocate_buffer(16), backend.allocate_buffer(16)
    backend.copy_to_buffer(src, np.array([-1, 2, -3, 4], np.int32))
    backend.execute_program(_abs(Address.buffer(dst), Address.buffer(src), 4, Type.I32), ONE)
    backend.execute_program(_abs(Address.buffer(dst), Address.buffer(src), 2, Type.F64), ONE)
    backend.copy_to_buffer(src, np.arange(2, dtype=np.float64))


def test_typed_checks_follow_allocation_and_free(backend):
    """A program first run beside raw buffers is checked again once a typed buffer appears."""
    a, b = backend.allocate_buffer(16), backend.allocate_buffer(16)
    program = _abs(Address.buffer(b), Address.buffer(a), 4, Type.F32)
    backend.execute_program_with_params(program, isa.ExecutionParams(ONE))
    t = backend.allocate_typed(4, Type.I32)
    mixed = _abs(Address.buffer(b), Address.buffer(t), 4, Type.F32)
    with pytest.raises(IsaError, match=f"buffer {t} holds I32"):
        backend.execute_program_with_params(mixed, isa.ExecutionParams(ONE))
    backend.execute_program_with_params(program, isa.ExecutionParams(ONE))
    backend.free_buffer(t)
    backend.execute_program_with_params(program, isa.ExecutionParams(ONE))


def test_extensions_check_each_operand_by_its_own_element_type(reference):
    a, b = reference.allocate_typed(4, Type.F16), reference.allocate_typed(4, Type.F16)
    c = reference.allocate_typed(4, Type.F32)
    gemm = isa.MixedPrecisionGEMM(Address.buffer(c), Address.buffer(a), Address.buffer(b), 2, 2, 2)
    reference.execute_program(ProgramBuilder().add(gemm).build(), ONE)
    wrong = isa.MixedPrecisionGEMM(Address.buffer(a), Address.buffer(c), Address.buffer(b), 2, 2, 2)
    with pytest.raises(IsaError, match=f"c writes buffer {a} as F32, but buffer {a} holds F16"):
        reference.execute_program(ProgramBuilder().add(wrong).build(), ONE)


def test_host_arrays_of_another_dtype_are_refused_raw_bytes_pass(backend):
    h = backend.allocate_typed(4, Type.F32)
    with pytest.raises(BackendError, match=r"buffer \d+ holds F32 elements, the array is float64; "
                                           r"convert it \(.astype\('float32'\)\)"):
        backend.copy_to_buffer(h, np.zeros(4))
    with pytest.raises(BackendError, match="the array is int32"):
        backend.copy_from_buffer(h, np.zeros(4, np.int32))
    backend.copy_to_buffer(h, np.ones(4, np.float32).view(np.uint8))
    backend.copy_to_buffer(h, np.ones(4, np.float32).tobytes())
    out = bytearray(16)
    backend.copy_from_buffer(h, out)
    assert np.frombuffer(out, np.float32).tolist() == [1, 1, 1, 1]


def test_reinterpret_is_a_buffer_marker_kept_by_json_and_disassembly():
    program = _abs(Address.buffer(2), Address.buffer(1, 8, reinterpret=True), 4, Type.I32)
    assert "[buf1+8 reinterpret]" in str(program)
    again = isa.from_json(program.to_json())
    assert again.instructions[0].src_array.reinterpret and not again.instructions[0].dst_array.reinterpret
    assert again.digest() == program.digest()
    assert Address.buffer(1, 8, reinterpret=True) == Address.buffer(1, 8)  # the same bytes either way
    with pytest.raises(IsaError, match="a class address has no element type"):
        _abs(Address.cls(0), Address(isa.Space.CLASS, 1, 0, None, True), 4, Type.I32)


def _address(memory, handle: int) -> int:
    data = memory.buffers[handle] if handle in memory.buffers else memory.pools[handle]
    return data.data_ptr() if hasattr(data, "data_ptr") else data.ctypes.data


@pytest.mark.parametrize("size", [0, 1, 7, 100, 4096, 1 << 20])
def test_every_allocation_is_64_byte_aligned(backend, size):
    """Host targets align their own allocations; the triton target's torch allocator already does
    (64 bytes on the CPU, at least 256 from the CUDA caching allocator)."""
    if backend.name == "remote":
        pytest.skip("the remote target's memory lives on the service, in its kernel target's (tested there)")
    mem = backend.memory
    handles = [backend.allocate_buffer(size), backend.allocate_pool(size),
               mem.allocate_pool(size, zeroed=False), backend.allocate_typed(size, Type.F64)]
    if size:
        for h in handles:
            assert _address(mem, h) % 64 == 0
    cm = mem.class_memory
    assert (cm.data_ptr() if hasattr(cm, "data_ptr") else cm.ctypes.data) % 64 == 0
    pool = ProgramBuilder().add(isa.PoolAlloc(999, size or 1)).build()
    backend.execute_program(pool, ONE)
    assert _address(mem, 999) % 64 == 0
    raw = bytearray(size)
    backend.copy_from_buffer(handles[0], raw)
    assert raw == bytes(size)


@pytest.mark.parametrize("name", ["reference", "cpu"])
def test_host_blocks_are_pooled_by_size_and_come_back_zeroed(name):
    from tests.isa.conftest import make_backend

    backend = make_backend(name)
    mem = backend.memory
    h = backend.allocate_buffer(256)
    block = mem.buffers[h]
    backend.copy_to_buffer(h, bytes(range(256)))
    backend.free_buffer(h)
    p = backend.allocate_pool(256)
    assert mem.pools[p] is block and not mem.pools[p].any()  # the same block, zeroed again
    backend.free_pool(p)
    assert mem.buffers[backend.allocate_buffer(128)] is not block  # another size: a new block
    mine = np.arange(256, dtype=np.uint8)  # an array a caller put there is never handed out again
    h = backend.allocate_buffer(256)
    mem.buffers[h] = mine
    backend.free_buffer(h)
    assert mem.buffers[backend.allocate_buffer(256)] is not mine
    from eidos.isa.memory import POOLED_MAX

    big = backend.allocate_buffer(POOLED_MAX + 64)
    block = mem.buffers[big]
    backend.free_buffer(big)
    assert mem.buffers[backend.allocate_buffer(POOLED_MAX + 64)] is not block  # large blocks go back


def test_a_pool_allocated_every_launch_reuses_its_block(backend):
    """PoolAlloc/PoolFree on each launch (the tensor layer's scratch pools) keeps one block."""
    a, c = backend.allocate_buffer(64), backend.allocate_buffer(64)
    backend.copy_to_buffer(a, np.arange(-8, 8, dtype=np.float32))
    program = ProgramBuilder().add(
        isa.PoolAlloc(500, 64), isa.ParallelMap(Address.pool(500), Address.buffer(a), 16, MapOperation.Neg, Type.F32),
        isa.ParallelMap(Address.buffer(c), Address.pool(500), 16, MapOperation.Relu, Type.F32),
        isa.PoolFree(500)).build()
    for _ in range(3):
        backend.execute_program(program, ONE)
    out = np.zeros(16, np.float32)
    backend.copy_from_buffer(c, out)
    assert out.tolist() == np.maximum(-np.arange(-8, 8, dtype=np.float32), 0).tolist()
