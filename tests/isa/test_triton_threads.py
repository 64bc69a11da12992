"""Register programs over threads as Triton kernels (compile.py), against the reference interpreter:
control flow and divergence, predication, pointers, barriers, collectives between launches, errors
word for word, and generated programs. Without a CUDA device the kernels run in Triton's
interpreter (TRITON_INTERPRET=1, set before triton is imported), so sizes stay small."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

import numpy as np  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from eidos import isa  # noqa: E402
from eidos.errors import BackendError, UnsupportedError  # noqa: E402
from eidos.isa import Address, Condition, ExecutionParams, Label, LaunchConfig, Predicate, Register, Special, Type  # noqa: E402
from eidos.isa.backends.reference import ReferenceBackend  # noqa: E402
from eidos.isa.backends.triton import TritonBackend  # noqa: E402
from eidos.isa.backends.triton import compile as C  # noqa: E402
from tests.isa import strategies as S  # noqa: E402
from tests.isa.conftest import generated_examples  # noqa: E402

R = Register
U32, U64, I32, I64, F32, F64 = Type.U32, Type.U64, Type.I32, Type.I64, Type.F32, Type.F64
SLOW_OK = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


class ThreadsBackend(TritonBackend):
    """The triton backend with every program through C.compile_program (the backend itself sends
    code every lane runs alike to its array route instead); collectives through its run_collective."""

    name = "triton-lanes"

    def execute_program_with_params(self, program, params) -> None:
        program.validate()
        C.compile_program(program).launch(self.memory, params, max_steps=self.max_steps,
                                              run_collective=self.run_collective)


@pytest.fixture
def be():
    return ThreadsBackend()


def _both(program, config, setup=None, registers=None, read=()):
    """Run on the reference and on the lanes kernel from the same setup; return both sets of buffers."""
    outs = []
    for backend in (ReferenceBackend(), ThreadsBackend()):
        handles = setup(backend) if setup else []
        backend.execute_program_with_params(program, ExecutionParams(config, registers or {}))
        got = []
        for h in handles:
            buf = bytearray(backend.buffer_size(h))
            backend.copy_from_buffer(h, buf)
            got.append(bytes(buf))
        outs.append(got)
    return outs


def _lane_out(ty=U32):
    """ADDR <- r100 + global_id * size (r100 holds the output pointer)."""
    return [isa.MOV(R(90), Special.GLOBAL_ID, U64), isa.MOV_IMM(R(91), ty.size_bytes, U64),
            isa.MUL(R(90), R(90), R(91), U64), isa.ADD(R(90), R(90), R(100), U64)]


def _store(reg, ty=U32):
    return [*_lane_out(ty), isa.STG(Address.register(R(90)), reg, ty)]


def _out_setup(n, ty=U32):
    def setup(backend):
        return [backend.allocate_buffer(n * ty.size_bytes)]
    return setup


def test_straight_line_code_is_one_block_without_a_loop():
    p = isa.ProgramBuilder().add(isa.MOV(R(1), Special.GLOBAL_ID, U32), isa.MUL(R(1), R(1), R(1), U32),
                                 *_store(R(1))).build()
    k = C.compile_program(p)
    assert "while go:" not in k.source and "def threads(" in k.source
    ref, got = _both(p, LaunchConfig.linear(8), _out_setup(8), {100: isa.pointer(1)})
    assert got == ref and np.frombuffer(got[0], np.uint32).tolist() == [g * g for g in range(8)]


def test_divergent_if_else_and_per_lane_loop_counts():
    # lanes loop gid % 4 + 1 times through a backward BRA; odd lanes take the else arm
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(1), Special.GLOBAL_ID, I32), isa.MOV_IMM(R(2), 4, I32), isa.REM(R(3), R(1), R(2), I32),
          isa.MOV_IMM(R(4), 0, I32), isa.MOV_IMM(R(5), 1, I32), isa.MOV_IMM(R(6), 0, I32))
    top = b.label("top")
    b.add(isa.ADD(R(4), R(4), R(1), I32), isa.ADD(R(6), R(6), R(5), I32),
          isa.SETcc(Predicate(1), R(6), R(3), Condition.LE, I32), isa.BRA(top, Predicate(1)),
          isa.AND(R(7), R(1), R(5), I32), isa.SETcc(Predicate(2), R(7), R(5), Condition.EQ, I32),
          isa.BRA(Label("odd"), Predicate(2)),
          isa.MOV_IMM(R(8), 1000, I32), isa.BRA(Label("join")))
    b.label("odd")
    b.add(isa.MOV_IMM(R(8), 2000, I32))
    b.label("join")
    b.add(isa.ADD(R(4), R(4), R(8), I32), *_store(R(4), I32))
    p = b.build()
    k = C.compile_program(p)
    assert "while go:" in k.source and "while loop over" in k.how()
    ref, got = _both(p, LaunchConfig(grid=(2, 1, 1), block=(5, 1, 1)), _out_setup(10, I32), {100: isa.pointer(1)})
    want = [g * (g % 4 + 1) + (2000 if g % 2 else 1000) for g in range(10)]
    assert got == ref and np.frombuffer(got[0], np.int32).tolist() == want


def test_call_ret_nested_and_recursive_depth_per_lane():
    # f(n): n == 0 ? return : (acc += n; f(n - 1)) with per-lane n: stacks of different depths
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(1), Special.GLOBAL_ID, I64), isa.MOV_IMM(R(2), 0, I64), isa.MOV_IMM(R(3), 1, I64),
          isa.MOV_IMM(R(4), 0, I64), isa.CALL(Label("f")), *_store(R(2), I64), isa.EXIT())
    b.label("f")
    b.add(isa.SETcc(Predicate(0), R(1), R(4), Condition.EQ, I64), isa.BRA(Label("done"), Predicate(0)),
          isa.ADD(R(2), R(2), R(1), I64), isa.SUB(R(1), R(1), R(3), I64), isa.CALL(Label("f")))
    b.label("done")
    b.add(isa.RET())
    p = b.build()
    ref, got = _both(p, LaunchConfig.linear(6), _out_setup(6, I64), {100: isa.pointer(1)})
    assert got == ref and np.frombuffer(got[0], np.int64).tolist() == [g * (g + 1) // 2 for g in range(6)]


def test_predicated_skips_and_select_on_every_lane():
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(1), Special.GLOBAL_ID, U32), isa.CVT(R(2), R(1), U32, F32),
          isa.MOV_IMM(R(3), 2.5, F32), isa.SETcc(Predicate(3), R(2), R(3), Condition.LT, F32),
          isa.BRA(Label("skip"), Predicate(3)), isa.MUL(R(2), R(2), R(3), F32))
    b.label("skip")
    b.add(isa.SEL(R(4), Predicate(3), R(3), R(2), F32), *_store(R(4), F32))
    p = b.build()
    ref, got = _both(p, LaunchConfig.linear(5), _out_setup(5, F32), {100: isa.pointer(1)})
    assert got == ref and np.frombuffer(got[0], np.float32).tolist() == [2.5, 2.5, 2.5, 7.5, 10.0]


def test_pointers_into_buffers_pools_and_class_memory_unaligned():
    def setup(backend):
        buf = backend.allocate_buffer(96)
        pool = backend.allocate_pool(32)
        backend.copy_to_buffer(buf, bytes(range(96)))
        backend.copy_to_pool(pool, 0, bytes(range(100, 132)))
        backend.copy_to_class(3, 5, bytes(range(200, 216)))
        return [buf]
    # lane g reads a U32 at byte 1 + g of the buffer, of the pool (handle 2) and of class 3 (+5), unaligned
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(1), Special.GLOBAL_ID, U64), isa.MOV_IMM(R(2), isa.pointer(1, 1), U64),
          isa.ADD(R(2), R(2), R(1), U64), isa.LDG(R(3), Address.register(R(2)), U32),
          isa.MOV_IMM(R(2), isa.pointer(2, 1), U64), isa.ADD(R(2), R(2), R(1), U64),
          isa.LDG(R(4), Address.register(R(2)), U32),
          isa.MOV_IMM(R(2), isa.pointer(0, 3 * 12288 + 5), U64), isa.ADD(R(2), R(2), R(1), U64),
          isa.LDG(R(5), Address.register(R(2)), U32), isa.XOR(R(3), R(3), R(4), U32), isa.XOR(R(3), R(3), R(5), U32),
          isa.MOV_IMM(R(6), 8, U64), isa.MUL(R(6), R(6), R(1), U64), isa.MOV_IMM(R(7), isa.pointer(1, 33), U64),
          isa.ADD(R(6), R(6), R(7), U64), isa.STG(Address.register(R(6)), R(3), U32))
    ref, got = _both(b.build(), LaunchConfig.linear(6), setup)
    assert got == ref


def test_shared_memory_barrier_phases_per_block():
    # each lane writes its id, barrier, reads its neighbour's, barrier, writes the sum back, barrier, reads again
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(1), Special.THREAD_INDEX, U32), isa.MOV(R(2), Special.BLOCK_THREADS, U32),
          isa.MOV_IMM(R(3), 4, U32), isa.MUL(R(4), R(1), R(3), U32), isa.MOV(R(9), Special.GLOBAL_ID, U32),
          isa.STS(Address.register(R(4)), R(9), U32), isa.BarSync(0),
          isa.MOV_IMM(R(5), 1, U32), isa.ADD(R(6), R(1), R(5), U32), isa.REM(R(6), R(6), R(2), U32),
          isa.MUL(R(6), R(6), R(3), U32), isa.LDS(R(7), Address.register(R(6)), U32), isa.BarSync(0),
          isa.ADD(R(7), R(7), R(9), U32), isa.STS(Address.register(R(4)), R(7), U32), isa.BarSync(0),
          isa.LDS(R(8), Address.register(R(6)), U32), *_store(R(8)))
    config = LaunchConfig(grid=(3, 1, 1), block=(4, 1, 1), shared_memory=16)
    ref, got = _both(b.build(), config, _out_setup(12), {100: isa.pointer(1)})
    assert got == ref


def test_exited_lanes_leave_the_barrier_to_the_rest():
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(1), Special.THREAD_INDEX, U32), isa.MOV_IMM(R(2), 2, U32),
          isa.SETcc(Predicate(0), R(1), R(2), Condition.GE, U32), isa.BRA(Label("out"), Predicate(0)),
          isa.STS(Address.shared(0), R(1), U32), isa.BarSync(3), isa.LDS(R(3), Address.shared(0), U32),
          *_store(R(3)))
    b.label("out")
    b.add(isa.EXIT())
    ref, got = _both(b.build(), LaunchConfig(grid=(2, 1, 1), block=(4, 1, 1), shared_memory=4), _out_setup(8),
                     {100: isa.pointer(1)})
    assert got == ref


def test_barrier_with_different_ids_is_the_reference_error(be):
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(0), Special.THREAD_INDEX, U32), isa.MOV_IMM(R(1), 0, U32),
          isa.SETcc(Predicate(0), R(0), R(1), Condition.EQ, U32), isa.BRA(Label("other"), Predicate(0)),
          isa.BarSync(0), isa.EXIT())
    b.label("other")
    b.add(isa.BarSync(1))
    p = b.build()
    with pytest.raises(BackendError) as ref:
        ReferenceBackend().execute_program(p, LaunchConfig.linear(4))
    with pytest.raises(BackendError) as got:
        be.execute_program(p, LaunchConfig.linear(4))
    assert str(got.value) == str(ref.value)


@pytest.mark.parametrize("case", ["oob_const", "oob_pointer", "bad_handle", "negative", "shared", "neighbour",
                                  "freed_pool"])
def test_errors_are_the_reference_errors_word_for_word(case):
    def program(h):
        m = {"oob_const": [isa.MOV_IMM(R(0), 7, U32), isa.STG(Address.buffer(h, 6), R(0), U32)],
             "oob_pointer": [isa.MOV_IMM(R(0), isa.pointer(h, 5), U64), isa.LDG(R(1), Address.register(R(0)), U32)],
             "bad_handle": [isa.MOV_IMM(R(0), isa.pointer(99, 0), U64), isa.LDG(R(1), Address.register(R(0)), U32)],
             "negative": [isa.MOV_IMM(R(0), -4, I64), isa.LDG(R(1), Address.register(R(0)), U32)],
             "shared": [isa.MOV_IMM(R(0), 4, U32), isa.LDS(R(1), Address.register(R(0)), U32)],
             "neighbour": [isa.MOV_IMM(R(0), 2, U64), isa.NBRLoad(R(1), R(0), 1, U32)],
             "freed_pool": [isa.PoolFree(7), isa.PoolLoad(R(1), 7, 0, U32)]}[case]
        return isa.ProgramBuilder().add(*m).build()

    msgs = []
    for backend in (ReferenceBackend(), ThreadsBackend()):
        h = backend.allocate_buffer(8)
        backend.copy_to_buffer(h, b"abcdefgh")
        backend.memory.allocate_pool(16, 7)
        with pytest.raises(BackendError) as e:
            backend.execute_program(program(h), LaunchConfig(grid=(1, 1, 1), block=(2, 1, 1), shared_memory=4))
        got = bytearray(8)
        backend.copy_from_buffer(h, got)
        assert bytes(got) == b"abcdefgh"
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0]


def test_the_reported_lane_is_the_one_the_reference_meets_first():
    # lane 3 fails at instruction 4, lane 1 at instruction 8; both in the same pass of the kernel, but
    # the reference runs lane 1 to its end first, so lane 1's error is the one reported
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(1), Special.GLOBAL_ID, U32), isa.MOV_IMM(R(2), 3, U32),
          isa.SETcc(Predicate(0), R(1), R(2), Condition.NE, U32), isa.BRA(Label("skip"), Predicate(0)),
          isa.STG(Address.buffer(1, 2), R(1), U32))
    b.label("skip")
    b.add(isa.MOV_IMM(R(3), 1, U32), isa.SETcc(Predicate(1), R(1), R(3), Condition.NE, U32),
          isa.BRA(Label("end"), Predicate(1)), isa.STG(Address.buffer(1, 8), R(1), U32))
    b.label("end")
    b.add(isa.EXIT())
    p = b.build()
    msgs = []
    for backend in (ReferenceBackend(), ThreadsBackend()):
        backend.allocate_buffer(4)
        with pytest.raises(BackendError) as e:
            backend.execute_program(p, LaunchConfig.linear(4))
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0] and "instruction 8" in msgs[0]


def test_endless_loop_hits_the_step_budget():
    b = isa.ProgramBuilder()
    top = b.label()
    b.add(isa.BRA(top))
    p = b.build()
    with pytest.raises(BackendError, match="step limit") as e:
        ThreadsBackend(max_steps=50).execute_program(p, LaunchConfig.linear(2))
    with pytest.raises(BackendError) as ref:
        ReferenceBackend(max_steps=50).execute_program(p, LaunchConfig.linear(2))
    assert str(e.value) == str(ref.value)


def test_collective_between_launches_sees_every_lane_and_broadcasts():
    def setup(backend):
        a = backend.allocate_buffer(16)
        backend.copy_to_buffer(a, np.array([1, 2, 3, 4], np.float32))
        return [a, backend.allocate_buffer(16)]
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(1), Special.GLOBAL_ID, U64), isa.MOV_IMM(R(2), 4, U64), isa.MUL(R(3), R(1), R(2), U64),
          isa.MOV_IMM(R(4), isa.pointer(1), U64), isa.ADD(R(3), R(3), R(4), U64),
          isa.LDG(R(5), Address.register(R(3)), F32), isa.ADD(R(5), R(5), R(5), F32),
          isa.STG(Address.register(R(3)), R(5), F32),
          isa.ReduceAdd(R(6), Address.buffer(1), 4, F32),
          isa.MOV_IMM(R(4), isa.pointer(2), U64), isa.ADD(R(3), R(1), R(1), U64), isa.ADD(R(3), R(3), R(3), U64),
          isa.ADD(R(3), R(3), R(4), U64), isa.ADD(R(6), R(6), R(5), F32), isa.STG(Address.register(R(3)), R(6), F32))
    ref, got = _both(b.build(), LaunchConfig(grid=(2, 1, 1), block=(2, 1, 1)), setup)
    assert got == ref and np.frombuffer(got[1], np.float32).tolist() == [22.0, 24.0, 26.0, 28.0]


def test_branch_to_the_end_and_a_collective_last_exit_the_lanes(be):
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(1), Special.GLOBAL_ID, U32), isa.MOV_IMM(R(2), 1, U32),
          isa.SETcc(Predicate(0), R(1), R(2), Condition.EQ, U32), isa.BRA(Label("end"), Predicate(0)),
          *_store(R(1)))
    b.label("end")
    p = b.build()
    ref, got = _both(p, LaunchConfig.linear(3), _out_setup(3), {100: isa.pointer(1)})
    assert got == ref and np.frombuffer(got[0], np.uint32).tolist() == [0, 0, 2]
    pool = be.allocate_pool(8)
    be.execute_program(isa.ProgramBuilder().add(isa.MOV(R(1), Special.GLOBAL_ID, U32), isa.PoolFree(pool)).build(),
                       LaunchConfig.linear(2))
    with pytest.raises(BackendError, match="was freed"):
        be.pool_size(pool)


def test_extended_integers_are_unsupported_by_name():
    p = isa.ProgramBuilder().add(isa.MOV_IMM(R(0), 1, Type.I128), isa.ADD(R(0), R(0), R(0), Type.I128)).build()
    with pytest.raises(UnsupportedError, match=r"instruction 0 \(MOV_IMM\).*I128"):
        C.compile_program(p)


def test_kernels_are_cached_by_the_program_key():
    p = isa.ProgramBuilder().add(isa.MOV_IMM(R(0), 1, U32)).build()
    q = isa.ProgramBuilder().add(isa.MOV_IMM(R(0), 1, U32)).build()
    assert C.compile_program(p) is C.compile_program(q)


_HOPPER = r"""
import os, sys
os.environ.pop("TRITON_INTERPRET", None)
from tests.isa.thread_programs import hopper_programs
from eidos.isa.backends.triton.compile import build_for
for name, p in hopper_programs():
    k = build_for(p, 90)
    ptx = k.asm["ptx"]
    assert "bar.sync" in ptx or "barrier" in ptx or name != "barriers", name
    print(name, "ok", len(ptx))
"""


@pytest.mark.slow
def test_kernels_compile_for_hopper_without_a_gpu():
    """The interpreter never compiles: this runs Triton's real pipeline (PTX, ptxas) for sm_90."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", _HOPPER], cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count(" ok ") == 3, r.stdout


_EXACT_PTX = r"""
import os, re
os.environ.pop("TRITON_INTERPRET", None)
from eidos import isa
from eidos.isa import Address, Register as R, Type
from eidos.isa.backends.triton.compile import build_for
b = isa.ProgramBuilder()
for k, ty in ((0, Type.F32), (10, Type.F64)):
    b.add(isa.LDS(R(k + 1), Address.shared(16), ty), isa.LDS(R(k + 2), Address.shared(24), ty),  # not constants
          isa.MUL(R(k + 3), R(k + 1), R(k + 2), ty),
          isa.ADD(R(k + 3), R(k + 3), R(k + 1), ty), isa.MAD(R(k + 4), R(k + 1), R(k + 2), R(k + 3), ty),
          isa.DIV(R(k + 5), R(k + 4), R(k + 2), ty), isa.SQRT(R(k + 5), R(k + 5), ty),
          isa.STS(Address.shared(0), R(k + 5), ty))
b.add(isa.FMA(R(16), R(11), R(12), R(13), Type.F64), isa.STS(Address.shared(8), R(16), Type.F64))
ptx = build_for(b.build(), 90).asm["ptx"]
ops = re.findall(r"\b(?:fma|mad|mul|add|div|sqrt|cvt)\.[a-z0-9.]+", ptx)
print(sorted(set(ops)))
assert sum(o.startswith(("fma.", "mad.")) and o.endswith("f64") for o in ops) == 1, "only FMA may fuse"
assert not [o for o in ops if ".f32" in o and o.startswith(("fma", "mad"))], ops
assert not [o for o in ops if ".ftz" in o or ".approx" in o or ".full" in o], ops
assert "mul.rn.f64" in ops and "add.rn.f64" in ops and "div.rn.f64" in ops and "sqrt.rn.f64" in ops, ops
print("exact")
"""


def test_float_code_for_hopper_rounds_every_step():
    """On a GPU Triton contracts a * b + c into fma unless fp fusion is off (the interpreter never
    fuses): compile MUL then ADD, MAD, DIV, SQRT and one FMA for sm_90 with the launch's options and
    read the PTX: one fma (the FMA's), every other step .rn, nothing approximate or flushed to zero."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", _EXACT_PTX], cwd=root, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "exact" in r.stdout, r.stdout + r.stderr[-3000:]


def test_a_static_address_is_stored_by_the_last_lane_only():
    """Lanes storing to one static address: the reference's lane order leaves the last lane's value; a GPU
    scatter of one address from several threads keeps an unspecified one, so only the last lane stores."""
    p = isa.ProgramBuilder().add(isa.MOV(R(1), Special.THREAD_INDEX, U32), isa.STS(Address.shared(0), R(1), U32),
                                 isa.STS(Address.register(R(1)), R(1), U32)).build()
    src, _ = C.generate(p, p.digest(), interpreted=False)
    assert src.count("last = m & (t == tl.max(tl.where(m, t, -1), 0))") == 1
    assert "_st((at), i1, last, 4)" in src and "_st((at), i1, m, 4)" in src  # a per-lane address: every lane


# ---- generated programs (tests/isa/strategies.py) without the integers wider than 64 bits -------

@settings(max_examples=generated_examples(15), deadline=None, suppress_health_check=SLOW_OK)
@given(gp=S.programs(transcendentals=False, max_blocks=3, wide=False))
def test_generated_programs_store_the_reference_bytes(gp):
    assert S.run(ThreadsBackend(), gp) == S.run(ReferenceBackend(), gp)


@st.composite
def divergent_programs(draw):
    """Generated register code (tests/isa/strategies.py's instructions) in the shapes compile.py handles
    beyond the shared strategy: per-lane trip counts through backward BRA, subroutines (CALL/RET,
    nested), and barrier exchanges through shared memory between the lanes of a block."""
    b = isa.ProgramBuilder(metadata={"generated": "divergent"})
    types = tuple(S.NARROW_TYPES)
    b.add(*S._prologue(types))
    gid, k, one, cnt = R(240), R(241), R(242), R(243)
    b.add(isa.MOV(gid, Special.GLOBAL_ID, I64), isa.MOV_IMM(one, 1, I64))
    subs = []
    for n in range(draw(st.integers(1, 4))):
        body = [x for chunk in draw(st.lists(S._instruction(False, types), min_size=1, max_size=4)) for x in chunk]
        shape = draw(st.sampled_from(["trip", "call", "barrier", "line"]))
        if shape == "trip":  # lane g runs the body g mod m + 1 times
            m = draw(st.integers(1, 4))
            top = Label(f"trip{n}")
            b.add(isa.MOV_IMM(k, m, I64), isa.REM(k, gid, k, I64), isa.MOV_IMM(cnt, 0, I64))
            b.label(top)
            b.add(*body, isa.ADD(cnt, cnt, one, I64), isa.SETcc(Predicate(7), cnt, k, Condition.LE, I64),
                  isa.BRA(top, Predicate(7)))
        elif shape == "call":
            name = f"sub{n}"
            b.add(isa.CALL(Label(name)))
            subs.append((name, body, draw(st.booleans())))
        elif shape == "barrier":  # each lane publishes an I64 value, reads its neighbour's after BarSync
            v = draw(st.sampled_from(S.REGS[Type.I64]))
            b.add(isa.MOV(k, Special.THREAD_INDEX, I64), isa.MOV_IMM(cnt, 8, I64), isa.MUL(cnt, k, cnt, I64),
                  isa.STS(Address.register(cnt), v, I64), isa.BarSync(0), isa.ADD(k, k, one, I64),
                  isa.MOV(R(244), Special.BLOCK_THREADS, I64), isa.REM(k, k, R(244), I64),
                  isa.MOV_IMM(cnt, 8, I64), isa.MUL(cnt, k, cnt, I64), isa.LDS(v, Address.register(cnt), I64),
                  isa.BarSync(0), *body)
        else:
            b.add(*body)
    b.add(*S._epilogue(types), isa.EXIT())
    for j, (name, body, nested) in enumerate(subs):
        b.label(name)
        b.add(*body, *([isa.CALL(Label(subs[j - 1][0]))] if nested and j > 0 else []), isa.RET())
    bs = draw(st.sampled_from([1, 3, 4]))
    return S.GeneratedProgram(b.build(), LaunchConfig(grid=(draw(st.integers(1, 2)), 1, 1), block=(bs, 1, 1),
                                                      shared_memory=8 * bs), types)


@settings(max_examples=generated_examples(10), deadline=None, suppress_health_check=SLOW_OK)
@given(gp=divergent_programs())
def test_generated_divergent_programs_store_the_reference_bytes(gp):
    assert S.run(ThreadsBackend(), gp) == S.run(ReferenceBackend(), gp)
