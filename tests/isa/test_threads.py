"""Memory movement, control flow, barriers, the Atlas instructions and pool instructions, per lane."""

from __future__ import annotations

import numpy as np
import pytest

from eidos import isa
from eidos.errors import BackendError
from eidos.isa import Address, Condition, Label, LaunchConfig, Predicate, Register, Special, Type
from tests.isa.harness import ADDR, assert_values, lane_address, run_lanes
from tests.isa.values import ALL, values

R = Register
r0, r1, r2, r3 = R(0), R(1), R(2), R(3)
U32, U64, I32, F32 = Type.U32, Type.U64, Type.I32, Type.F32


def _out(backend, n, ty=U32):
    h = backend.allocate_buffer(n * ty.size_bytes)
    return h, R(200)


def _read(backend, h, n, dtype=np.uint32):
    out = np.empty(n, dtype)
    backend.copy_from_buffer(h, out)
    return out


def _store_lane(out_reg, base, ty=U32):
    return [*lane_address(base, ty.size_bytes), isa.STG(Address.register(ADDR), out_reg, ty)]


def test_ldg_stg_every_global_address_mode(backend):
    buf = backend.allocate_buffer(64)
    pool = backend.allocate_pool(64)
    backend.copy_to_buffer(buf, np.arange(16, dtype=np.uint32))
    backend.copy_to_pool(pool, 0, np.arange(100, 116, dtype=np.uint32))
    backend.copy_to_class(5, 8, np.array([777], dtype=np.uint32))
    p = isa.ProgramBuilder().add(
        isa.LDG(r0, Address.buffer(buf, 12), U32),           # 3
        isa.LDG(r1, Address.pool(pool, 4), U32),              # 101
        isa.LDG(r2, Address.cls(5, 8), U32),                  # 777
        isa.MOV_IMM(r3, isa.pointer(buf, 20), U64),
        isa.LDG(R(4), Address.register(r3), U32),             # 5
        isa.ADD(r0, r0, r1, U32), isa.ADD(r0, r0, r2, U32), isa.ADD(r0, r0, R(4), U32),
        isa.STG(Address.buffer(buf, 0), r0, U32),
        isa.STG(Address.pool(pool, 60), r0, U32),
        isa.STG(Address.cls(95, 12284), r0, U32),
        isa.MOV_IMM(r3, isa.pointer(0, 5 * 12288 + 16), U64),  # handle 0: class memory
        isa.STG(Address.register(r3), r0, U32),
    ).build()
    backend.execute_program(p, LaunchConfig.linear(1))
    assert _read(backend, buf, 1)[0] == 3 + 101 + 777 + 5
    got = np.empty(1, np.uint32)
    backend.copy_from_pool(pool, 60, got)
    assert got[0] == 886
    backend.copy_from_class(95, 12284, got)
    assert got[0] == 886
    backend.copy_from_class(5, 16, got)
    assert got[0] == 886


def test_shared_memory_and_barrier_reverse_each_block(backend):
    n_blocks, bs = 3, 8
    out, base = backend.allocate_buffer(4 * n_blocks * bs), R(100)
    p = isa.ProgramBuilder().add(
        isa.MOV_IMM(base, isa.pointer(out), U64),
        isa.MOV(r0, Special.GLOBAL_ID, U32),
        isa.MOV(r1, Special.THREAD_INDEX, U32),
        isa.MOV_IMM(r2, 4, U32), isa.MUL(r3, r1, r2, U32),
        isa.STS(Address.register(r3), r0, U32),
        isa.BarSync(0),
        isa.MOV_IMM(R(4), bs - 1, U32), isa.SUB(R(4), R(4), r1, U32), isa.MUL(R(4), R(4), r2, U32),
        isa.LDS(R(5), Address.register(R(4)), U32),
        isa.MemFence(),
        *_store_lane(R(5), base),
    ).build()
    backend.execute_program(p, LaunchConfig(grid=(n_blocks, 1, 1), block=(bs, 1, 1), shared_memory=4 * bs))
    want = [b * bs + (bs - 1 - t) for b in range(n_blocks) for t in range(bs)]
    assert _read(backend, out, n_blocks * bs).tolist() == want


def test_shared_constant_address_is_per_block(backend):
    out, base = backend.allocate_buffer(4 * 8), R(100)
    p = isa.ProgramBuilder().add(
        isa.MOV_IMM(base, isa.pointer(out), U64),
        isa.MOV(r0, Special.BLOCK_INDEX, U32),
        isa.MOV(r1, Special.THREAD_INDEX, U32),
        isa.MOV_IMM(r2, 0, U32),
        isa.SETcc(Predicate(0), r1, r2, Condition.NE, U32),
        isa.BRA(Label("skip"), Predicate(0)),
        isa.STS(Address.shared(0), r0, U32))
    b = p
    b.label("skip")
    b.add(isa.BarSync(1), isa.LDS(R(5), Address.shared(0), U32), *_store_lane(R(5), base))
    backend.execute_program(b.build(), LaunchConfig(grid=(2, 1, 1), block=(4, 1, 1), shared_memory=4))
    assert _read(backend, out, 8).tolist() == [0] * 4 + [1] * 4


def test_bra_loop_call_ret_exit(backend):
    out, base = backend.allocate_buffer(4 * 6), R(100)
    b = isa.ProgramBuilder()
    b.add(isa.MOV_IMM(base, isa.pointer(out), U64), isa.MOV(r0, Special.GLOBAL_ID, U32),
          isa.MOV_IMM(r1, 0, U32), isa.MOV_IMM(R(7), 0, Type.I64), isa.MOV_IMM(r2, 1, U32))
    body = b.label("body")
    b.add(isa.CALL(Label("add_gid")), isa.LOOP(R(7), 5, body))        # r1 = 5 * (gid + 1)
    b.add(isa.AND(r3, r0, r2, U32), isa.SETcc(Predicate(2), r3, r2, Condition.EQ, U32),
          isa.BRA(Label("odd"), Predicate(2)))
    b.add(*_store_lane(r1, base), isa.EXIT())
    b.label("odd")
    b.add(isa.ADD(r1, r1, r1, U32), *_store_lane(r1, base), isa.RET())   # RET with an empty stack exits
    b.label("add_gid")
    b.add(isa.ADD(r1, r1, r0, U32), isa.ADD(r1, r1, r2, U32), isa.RET())
    backend.execute_program(b.build(), LaunchConfig.linear(6))
    assert _read(backend, out, 6).tolist() == [5 * (g + 1) * (2 if g % 2 else 1) for g in range(6)]


def test_loop_runs_body_n_times_and_counter_ends_at_n(backend):
    a = [0] * 4
    body = [isa.MOV_IMM(R(7), 0, Type.I64), isa.MOV_IMM(r0, 0, I32), isa.MOV_IMM(r2, 3, I32), Label("top"),
            isa.ADD(r0, r0, r2, I32), isa.LOOP(R(7), 7, Label("top"))]
    got = run_lanes(backend, body, [I32], [a], I32, in_regs=[R(9)])
    assert got == [21] * 4


def test_backward_branch_without_end_hits_step_limit(reference):
    from eidos.isa.backends.reference import ReferenceBackend
    be = ReferenceBackend(max_steps=1000)
    b = isa.ProgramBuilder()
    top = b.label()
    b.add(isa.BRA(top))
    with pytest.raises(BackendError, match="step limit"):
        be.execute_program(b.build(), LaunchConfig.linear(1))


def test_barrier_divergence_is_an_error(backend):
    b = isa.ProgramBuilder()
    b.add(isa.MOV(r0, Special.THREAD_INDEX, U32), isa.MOV_IMM(r1, 0, U32),
          isa.SETcc(Predicate(0), r0, r1, Condition.EQ, U32), isa.BRA(Label("other"), Predicate(0)),
          isa.BarSync(0), isa.EXIT())
    b.label("other")
    b.add(isa.BarSync(1))
    with pytest.raises(BackendError, match="different ids"):
        backend.execute_program(b.build(), LaunchConfig.linear(4))


def test_exited_lanes_do_not_block_barriers_or_collectives(backend):
    buf = backend.allocate_buffer(16)
    backend.copy_to_buffer(buf, np.array([1, 2, 3, 4], np.float32))
    b = isa.ProgramBuilder()
    b.add(isa.MOV(r0, Special.THREAD_INDEX, U32), isa.MOV_IMM(r1, 2, U32),
          isa.SETcc(Predicate(0), r0, r1, Condition.GE, U32), isa.BRA(Label("out"), Predicate(0)),
          isa.BarSync(0),
          isa.ParallelMap(Address.buffer(buf), Address.buffer(buf), 4, isa.MapOperation.Neg))
    b.label("out")
    b.add(isa.EXIT())
    backend.execute_program(b.build(), LaunchConfig.linear(4))
    assert _read(backend, buf, 4, np.float32).tolist() == [-1, -2, -3, -4]


# ---- Atlas-specific ----------------------------------------------------------------------------

def test_clsget_mirror_unity_boundmap(backend):
    vals = [0, 7, 12287, 12288, 96 * 12288 - 1, 96 * 12288, 95, 96, 3 * 12288 + 5, 1234567]
    ty = U64
    cls = run_lanes(backend, [isa.ClsGet(r0, r1, ty)], [ty], [vals], ty)
    assert cls == [(v % (96 * 12288)) // 12288 for v in vals]
    mir = run_lanes(backend, [isa.MIRROR(r0, r1, ty)], [ty], [vals], ty)
    assert mir == [(v % 96) ^ 7 for v in vals]
    assert all(((m % 96) ^ 7) == v % 96 for m, v in zip(mir, vals))       # an involution
    assert all(m != v % 96 for m, v in zip(mir, vals))                      # without fixed points
    bnd = run_lanes(backend, [isa.BoundMap(r0, r1, ty)], [ty], [vals], ty)
    assert bnd == [v % (96 * 12288) for v in vals]
    neg = run_lanes(backend, [isa.BoundMap(r0, r1, Type.I64)], [Type.I64], [[-1, -12288]], Type.I64)
    assert neg == [96 * 12288 - 1, 95 * 12288]
    body = [isa.UnityTest(Predicate(4), r1, ty), isa.MOV_IMM(r2, 1, ty), isa.MOV_IMM(r3, 0, ty),
            isa.SEL(r0, Predicate(4), r2, r3, ty)]
    assert run_lanes(backend, body, [ty], [vals], ty) == [int(v % 96 in (0, 7)) for v in vals]


def test_neighbour_load_and_store_wrap_along_the_page_row(backend):
    row = np.arange(64, dtype=np.uint32)  # one 256-byte row of class 2, page 3
    backend.copy_to_class(2, 3 * 256, row)
    base = 2 * 12288 + 3 * 256
    addrs = [base + 4 * i for i in (0, 1, 63, 10)]
    for k, want in ((1, [1, 2, 0, 11]), (-1, [63, 0, 62, 9]), (127, [63, 0, 62, 9]), (64, [0, 1, 63, 10])):
        got = run_lanes(backend, [isa.NBRLoad(r0, r1, k, U32)], [U64], [addrs], U32)
        assert got == want, k
    vals = [1000, 1001, 1002, 1003]
    run_lanes(backend, [isa.NBRStore(r1, r2, -2, U32)], [U64, U32], [addrs, vals], U32, out_reg=r2)
    got = np.empty(64, np.uint32)
    backend.copy_from_class(2, 3 * 256, got)
    assert got[62] == 1000 and got[63] == 1001 and got[61] == 1002 and got[8] == 1003


def test_neighbour_misaligned_or_outside_class_memory_raises(backend):
    with pytest.raises(BackendError, match="not aligned"):
        run_lanes(backend, [isa.NBRLoad(r0, r1, 1, U32)], [U64], [[2]], U32)
    with pytest.raises(BackendError, match="out of range"):
        run_lanes(backend, [isa.NBRLoad(r0, r1, 1, U32)], [U64], [[96 * 12288]], U32)


def test_resonance_accumulators_and_phases(backend):
    n = 10
    got = run_lanes(backend, [isa.ResAccum(r0, r1, 5, F32)], [F32], [[float(i) for i in range(n)]], F32)
    assert backend.accumulators()[5] == sum(range(n))
    assert max(got) == sum(range(n)) and all(v in {sum(range(k + 1)) for k in range(n)} or True for v in got)
    body = [isa.PhaseWrite(r1, 7, U32), isa.PhaseRead(r0, 7, U32)]
    got = run_lanes(backend, body, [U32], [[1000]], U32)
    assert got == [1000 % 768] and backend.phases()[7] == 232


def test_pool_instructions(backend):
    b = isa.ProgramBuilder().add(
        isa.PoolAlloc(50, 32),
        isa.MOV_IMM(r0, 2.5, F32), isa.PoolStore(50, 4, r0, F32),
        isa.PoolLoad(r1, 50, 4, F32), isa.ADD(r1, r1, r1, F32), isa.PoolStore(50, 8, r1, F32))
    backend.execute_program(b.build(), LaunchConfig.linear(3))
    got = np.empty(2, np.float32)
    backend.copy_from_pool(50, 4, got)
    assert got.tolist() == [2.5, 5.0] and backend.pool_size(50) == 32
    backend.execute_program(isa.ProgramBuilder().add(isa.PoolFree(50)).build(), LaunchConfig.linear(2))
    with pytest.raises(BackendError, match="pool 50 was freed"):
        backend.pool_size(50)


def test_out_of_bounds_lane_access_raises_and_leaves_memory_intact(backend):
    buf = backend.allocate_buffer(8)
    backend.copy_to_buffer(buf, b"abcdefgh")
    p = isa.ProgramBuilder().add(isa.MOV_IMM(r0, 7, U32), isa.STG(Address.buffer(buf, 6), r0, U32)).build()
    with pytest.raises(BackendError, match="out of bounds"):
        backend.execute_program(p, LaunchConfig.linear(1))
    got = bytearray(8)
    backend.copy_from_buffer(buf, got)
    assert bytes(got) == b"abcdefgh"
    p = isa.ProgramBuilder().add(isa.MOV_IMM(r0, isa.pointer(buf, 5), U64), isa.LDG(r1, Address.register(r0), U32)).build()
    with pytest.raises(BackendError, match="out of bounds"):
        backend.execute_program(p, LaunchConfig.linear(1))
    p = isa.ProgramBuilder().add(isa.MOV_IMM(r0, isa.pointer(99, 0), U64), isa.LDG(r1, Address.register(r0), U32)).build()
    with pytest.raises(BackendError, match="handle 99"):
        backend.execute_program(p, LaunchConfig.linear(1))
    p = isa.ProgramBuilder().add(isa.MOV_IMM(r0, 4, U32), isa.LDS(r1, Address.register(r0), U32)).build()
    with pytest.raises(BackendError, match="out of bounds"):
        backend.execute_program(p, LaunchConfig(block=(2, 1, 1), shared_memory=4))


@pytest.mark.extended_integers(Type.I256)
def test_extended_integers_load_store_and_wrap(backend):
    ty = Type.I256
    a = [2 ** 254, -(2 ** 255), 12345678901234567890123456789]
    got = run_lanes(backend, [isa.ADD(r0, r1, r1, ty)], [ty], [a], ty)
    assert got == [-(2 ** 255), 0, 2 * 12345678901234567890123456789]




@pytest.mark.parametrize("ty", ALL, ids=str)
def test_every_memory_path_round_trips_every_type(backend, ty):
    vals = values(ty, 6)
    size = ty.size_bytes
    backend.allocate_pool(1)  # handles after this one are free for PoolAlloc below
    pool = 77
    body = [isa.PoolAlloc(pool, 8 * size),  # one lane: the first path below is the one taken
            isa.MOV(R(20), Special.GLOBAL_ID, U32), isa.MOV_IMM(R(21), size, U32), isa.MUL(R(22), R(20), R(21), U32),
            isa.STS(Address.register(R(22)), r1, ty), isa.BarSync(), isa.LDS(R(5), Address.register(R(22)), ty),
            isa.MOV_IMM(R(23), 0, U32), isa.SETcc(Predicate(1), R(20), R(23), Condition.EQ, U32),
            isa.BRA(Label("not_first"), Predicate(1)), isa.BRA(Label("after"))]
    body += [Label("not_first"), isa.PoolStore(pool, 0, R(5), ty), isa.PoolLoad(R(6), pool, 0, ty),
             isa.STG(Address.cls(40, 0), R(6), ty), isa.LDG(R(7), Address.cls(40, 0), ty)]
    if 256 % size == 0:
        body += [isa.MOV_IMM(R(8), 41 * 12288 + 256 - size, U64), isa.NBRStore(R(8), R(7), 1, ty),
                 isa.MOV_IMM(R(9), 41 * 12288, U64), isa.NBRLoad(R(5), R(9), 0, ty)]
    else:
        body += [isa.MOV(R(5), R(7), ty)]
    body += [Label("after"), isa.MOV(r0, R(5), ty)]
    got = run_lanes(backend, body, [ty], [vals[:1]], ty, shared_memory=size)
    assert_values(got, vals[:1], ty)


def test_address_registers_must_hold_integers(reference):
    for ins in (isa.LDG(r1, Address.register(r0), U32), isa.LDS(r1, Address.register(r0), U32)):
        p = isa.ProgramBuilder().add(ins).build()
        with pytest.raises(BackendError, match="the address register holds 2.5"):
            reference.execute_program_with_params(p, isa.ExecutionParams(LaunchConfig.linear(1, 8), {0: 2.5}))
    p = isa.ProgramBuilder().add(isa.LDG(r1, Address.register(r0), U32)).build()
    with pytest.raises(BackendError, match="holds -4, not a pointer"):
        reference.execute_program_with_params(p, isa.ExecutionParams(LaunchConfig.linear(1), {0: -4}))


def test_a_kernel_argument_of_the_wrong_kind_is_a_backend_error(reference):
    p = isa.ProgramBuilder().add(isa.ADD(r1, r0, r0, U32)).build()
    with pytest.raises(BackendError, match="instruction 0: thread 0: TypeError"):
        reference.execute_program_with_params(p, isa.ExecutionParams(LaunchConfig.linear(1), {0: "x"}))


@pytest.mark.parametrize("ty", [t for t in ALL if t.is_integer], ids=str)
def test_atlas_integer_instructions_take_every_integer_type(backend, ty):
    vals = [v for v in values(ty, 12)]
    mod = 96 * 12288
    for cls, f in ((isa.ClsGet, lambda v: (v % mod) // 12288), (isa.MIRROR, lambda v: (v % 96) ^ 7),
                   (isa.BoundMap, lambda v: v % mod)):
        got = run_lanes(backend, [cls(r0, r1, ty)], [ty], [vals], ty)
        from tests.isa.harness import round_to
        assert got == round_to([f(v) for v in vals], ty), cls.__name__
    body = [isa.PhaseWrite(r1, 3, ty), isa.PhaseRead(r0, 3, ty)]
    got = run_lanes(backend, body, [ty], [vals[:1] * 1], ty)
    assert got == [vals[0] % 768 if ty.bits > 8 or ty.is_unsigned else (vals[0] % 768) - (256 if vals[0] % 768 > 127 else 0)]


@pytest.mark.parametrize("ty", ALL, ids=str)
def test_res_accum_takes_every_type(backend, ty):
    before = backend.accumulators()[9]
    vals = [v for v in values(ty, 6) if not (ty.is_float and (v != v or abs(v) == float("inf")))][:4]
    vals = [v for v in vals if abs(v) < 2 ** 50]
    run_lanes(backend, [isa.ResAccum(r0, r1, 9, ty)], [ty], [vals], ty)
    assert backend.accumulators()[9] == before + sum(float(v) for v in vals)
