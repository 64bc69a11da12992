"""The compiled CPU backend's own contract: caching (memory and disk), explain(), parallel
launches equal to lane order, barriers and collectives, identical errors, no-numba fallback."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from eidos import isa
from eidos.errors import BackendError, UnsupportedError
from eidos.isa import Address, Condition, ExecutionParams, Label, LaunchConfig, Predicate, Special, Type
from eidos.isa import Register as R
from eidos.isa.backends.reference import ReferenceBackend
from tests.isa.harness import assert_values

pytest.importorskip("numba")
from eidos.isa.backends import cpu as cpu_module  # noqa: E402
from eidos.isa.backends.cpu import CpuBackend  # noqa: E402
from eidos.isa.backends.cpu.compile import Accesses  # noqa: E402

U64, F32, I32 = Type.U64, Type.F32, Type.I32


def lane_program(extra=(), store_at_lane: bool = True) -> isa.Program:
    """out[gid] = in[gid] * 2 + gid (F32), pointers in r10 (in) and r11 (out)."""
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(0), Special.GLOBAL_ID, U64), isa.MOV_IMM(R(1), 4, U64), isa.MUL(R(2), R(0), R(1), U64),
          isa.ADD(R(3), R(10), R(2), U64), isa.LDG(R(4), Address.register(R(3)), F32),
          isa.CVT(R(5), R(0), U64, F32), isa.MOV_IMM(R(6), 2.0, F32), isa.FMA(R(7), R(4), R(6), R(5), F32), *extra)
    if store_at_lane:
        b.add(isa.ADD(R(8), R(11), R(2), U64))
    else:
        b.add(isa.MOV(R(8), R(11), U64))
    b.add(isa.STG(Address.register(R(8)), R(7), F32))
    return b.build()


def run_both(program, n, inputs: dict[int, np.ndarray], out_bytes: int, config=None, backends=None):
    """Run on the cpu backend and the reference; return both outputs (bytes) and the cpu backend."""
    results = []
    backends = backends or [CpuBackend(), ReferenceBackend()]
    for be in backends:
        params = {}
        for reg, arr in inputs.items():
            h = be.allocate_buffer(arr.nbytes)
            be.copy_to_buffer(h, arr)
            params[reg] = isa.pointer(h)
        out = be.allocate_buffer(out_bytes)
        params[11] = isa.pointer(out)
        be.execute_program_with_params(program, ExecutionParams(config or LaunchConfig.linear(n), params))
        data = bytearray(out_bytes)
        be.copy_from_buffer(out, data)
        results.append(bytes(data))
    return results[0], results[1], backends[0]


def test_second_compile_is_a_cache_hit(tmp_path):
    be = CpuBackend(cache_dir=tmp_path)
    be.plan(lane_program())
    hits = be.cache.hits
    be.plan(lane_program())  # an equal program, a new object: found by its Blake3 key
    assert be.cache.hits == hits + 1
    assert list(tmp_path.glob("prog_*.py"))


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from eidos import isa
    from tests.isa.test_cpu import lane_program
    from eidos.isa.backends.cpu import CpuBackend
    be = CpuBackend(cache_dir=sys.argv[1])
    n = 64
    a, out = be.allocate_buffer(4 * n), be.allocate_buffer(4 * n)
    be.copy_to_buffer(a, np.arange(n, dtype=np.float32))
    p = lane_program()
    be.execute_program_with_params(p, isa.ExecutionParams(isa.LaunchConfig.linear(n), {10: isa.pointer(a), 11: isa.pointer(out)}))
    res = np.zeros(n, np.float32); be.copy_from_buffer(out, res)
    fn = be.plan(p).compiled.run_seq
    print(json.dumps({"hits": sum(fn.stats.cache_hits.values()), "misses": sum(fn.stats.cache_misses.values()),
                      "ok": bool((res == np.arange(n) * 3).all())}))
""")


def test_a_new_process_loads_from_disk(tmp_path):
    import os

    env = dict(os.environ)
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path)], capture_output=True, text=True, env=env,
                           cwd=str(__import__("pathlib").Path(__file__).parents[2]))
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["ok"] and second["ok"]
    assert first["misses"] >= 1 and first["hits"] == 0
    assert second["hits"] >= 1 and second["misses"] == 0


def test_explain_says_how_and_why(tmp_path):
    be = CpuBackend(cache_dir=tmp_path)
    text = be.explain(lane_program())
    assert "numba" in text and "runs: threads" in text and "compiled once to native code" in text
    params = ExecutionParams(LaunchConfig.linear(8192), {10: isa.pointer(1), 11: isa.pointer(2)})
    assert "threads in parallel (prange)" in be.explain(lane_program(), params)
    same = lane_program(store_at_lane=False)  # every lane stores to one address: lane order
    assert "threads in order" in be.explain(same, ExecutionParams(LaunchConfig.linear(8192), {10: isa.pointer(1), 11: isa.pointer(2)}))
    ext = isa.ProgramBuilder().add(isa.MOV_IMM(R(0), 5, Type.I128), isa.ADD(R(1), R(0), R(0), Type.I128)).build()
    assert "runs: interpreted" in be.explain(ext) and "I128" in be.explain(ext)
    arr = isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(1), Address.buffer(1), 4, isa.MapOperation.Exp)).build()
    assert "runs: array" in be.explain(arr) and "numba loop" in be.explain(arr)
    bar = isa.ProgramBuilder().add(isa.BarSync(0)).build()
    assert "runs: rounds" in be.explain(bar)


def test_parallel_launch_equals_lane_order(tmp_path):
    n = 5000
    x = np.linspace(-3, 3, n, dtype=np.float32)
    got, want, be = run_both(lane_program(), n, {10: x}, 4 * n, backends=[CpuBackend(cache_dir=tmp_path), ReferenceBackend()])
    assert got == want
    params = ExecutionParams(LaunchConfig.linear(n), {10: isa.pointer(1), 11: isa.pointer(2)})
    assert be.parallel_reason(be.plan(lane_program()), params) is None


def test_racing_stores_keep_the_reference_order(tmp_path):
    n = 5000
    x = np.linspace(-3, 3, n, dtype=np.float32)
    p = lane_program(store_at_lane=False)
    got, want, _ = run_both(p, n, {10: x}, 4 * n, backends=[CpuBackend(cache_dir=tmp_path), ReferenceBackend()])
    assert got == want  # the last lane's value, as lanes run in order


def test_hazard_analysis():
    p = lane_program()
    acc = Accesses(p)
    cfg = LaunchConfig.linear(100)
    assert acc.check({10: isa.pointer(1), 11: isa.pointer(2)}, cfg) is None
    assert acc.check({10: isa.pointer(1), 11: isa.pointer(1)}, cfg) is None          # in place: same slot
    assert acc.check({10: isa.pointer(1), 11: isa.pointer(1, 4)}, cfg) is not None   # shifted alias
    assert acc.check({10: isa.pointer(1), 11: isa.pointer(1, 400)}, cfg) is None     # disjoint halves
    assert Accesses(lane_program(store_at_lane=False)).check({10: isa.pointer(1), 11: isa.pointer(2)}, cfg)


def block_sum_program(block: int) -> isa.Program:
    """Each block sums its lanes' inputs through shared memory (tree with barriers); lane 0 stores it."""
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(0), Special.GLOBAL_ID, U64), isa.MOV_IMM(R(1), 4, U64), isa.MUL(R(2), R(0), R(1), U64),
          isa.ADD(R(3), R(10), R(2), U64), isa.LDG(R(4), Address.register(R(3)), F32),
          isa.MOV(R(5), Special.THREAD_INDEX, U64), isa.MUL(R(6), R(5), R(1), U64),
          isa.STS(Address.register(R(6)), R(4), F32), isa.BarSync(0),
          isa.MOV_IMM(R(7), block // 2, U64))
    b.label("step")
    b.add(isa.SETcc(Predicate(0), R(5), R(7), Condition.LT, U64),
          isa.SETcc(Predicate(1), R(5), R(7), Condition.GE, U64),
          isa.BRA(Label("skip"), Predicate(1)),
          isa.ADD(R(8), R(5), R(7), U64), isa.MUL(R(8), R(8), R(1), U64),
          isa.LDS(R(9), Address.register(R(8)), F32), isa.LDS(R(12), Address.register(R(6)), F32),
          isa.ADD(R(12), R(12), R(9), F32), isa.STS(Address.register(R(6)), R(12), F32))
    b.label("skip")
    b.add(isa.BarSync(0), isa.MOV_IMM(R(13), 1, U64), isa.SHR(R(7), R(7), R(13), U64),
          isa.MOV_IMM(R(14), 0, U64), isa.SETcc(Predicate(2), R(7), R(14), Condition.NE, U64),
          isa.BRA(Label("step"), Predicate(2)),
          isa.SETcc(Predicate(3), R(5), R(14), Condition.NE, U64), isa.BRA(Label("done"), Predicate(3)),
          isa.MOV(R(15), Special.BLOCK_INDEX, U64), isa.MUL(R(15), R(15), R(1), U64), isa.ADD(R(15), R(11), R(15), U64),
          isa.LDS(R(16), Address.shared(0), F32), isa.STG(Address.register(R(15)), R(16), F32))
    b.label("done")
    return b.build()


@pytest.mark.parametrize("blocks", [1, 3])
def test_barriers_and_shared_memory(tmp_path, blocks):
    block = 64
    n = block * blocks
    x = np.arange(n, dtype=np.float32) / 8
    cfg = LaunchConfig((blocks, 1, 1), (block, 1, 1), shared_memory=4 * block)
    got, want, be = run_both(block_sum_program(block), n, {10: x}, 4 * blocks, cfg,
                             backends=[CpuBackend(cache_dir=tmp_path), ReferenceBackend()])
    assert got == want
    assert np.frombuffer(got, np.float32)[0] == x[:block].sum()
    assert "runs: rounds" in be.explain(block_sum_program(block))


def test_collective_inside_a_register_program(tmp_path):
    """ParallelReduce in the middle: every lane receives the sum, then scales its own element."""
    n = 300
    x = np.linspace(0, 1, n, dtype=np.float32)
    for be_list in ([CpuBackend(cache_dir=tmp_path), ReferenceBackend()],):
        outs = []
        for be in be_list:
            a, out = be.allocate_buffer(4 * n), be.allocate_buffer(4 * n)
            be.copy_to_buffer(a, x)
            b = isa.ProgramBuilder()
            b.add(isa.ParallelReduce(R(20), Address.buffer(a), n, isa.ReduceOperation.Sum, F32),
                  isa.MOV(R(0), Special.GLOBAL_ID, U64), isa.MOV_IMM(R(1), 4, U64), isa.MUL(R(2), R(0), R(1), U64),
                  isa.ADD(R(3), R(10), R(2), U64), isa.LDG(R(4), Address.register(R(3)), F32),
                  isa.DIV(R(5), R(4), R(20), F32), isa.ADD(R(3), R(11), R(2), U64), isa.STG(Address.register(R(3)), R(5), F32))
            be.execute_program_with_params(b.build(), ExecutionParams(LaunchConfig.linear(n),
                                                                      {10: isa.pointer(a), 11: isa.pointer(out)}))
            res = np.zeros(n, np.float32)
            be.copy_from_buffer(out, res)
            outs.append(res)
        assert outs[0].tobytes() == outs[1].tobytes()


def _error(be, program, params):
    with pytest.raises(BackendError) as e:
        be.execute_program_with_params(program, params)
    return str(e.value)


def test_errors_are_the_reference_errors(tmp_path):
    p = lane_program()
    msgs = []
    for be in (CpuBackend(cache_dir=tmp_path), ReferenceBackend()):
        a, out = be.allocate_buffer(16), be.allocate_buffer(16)  # 4 lanes fit, 8 do not
        cfg = LaunchConfig.linear(8)
        m1 = _error(be, p, ExecutionParams(cfg, {10: isa.pointer(a), 11: isa.pointer(out)}))
        be.free_buffer(a)
        m2 = _error(be, p, ExecutionParams(LaunchConfig.linear(2), {10: isa.pointer(a), 11: isa.pointer(out)}))
        m3 = _error(be, p, ExecutionParams(LaunchConfig.linear(2), {10: -8, 11: isa.pointer(out)}))
        msgs.append((m1, m2, m3))
    assert msgs[0] == msgs[1]
    assert "out of bounds" in msgs[0][0] and "freed" in msgs[0][1] and "no live buffer" in msgs[0][2]


def test_endless_loop_hits_the_step_limit(tmp_path):
    b = isa.ProgramBuilder()
    b.label("top")
    b.add(isa.BRA(Label("top")))
    p = b.build()
    m = [_error(be, p, ExecutionParams(LaunchConfig.linear(2))) for be in
         (CpuBackend(max_steps=1000, cache_dir=tmp_path), ReferenceBackend(max_steps=1000))]
    assert m[0] == m[1] and "step limit" in m[0]


def test_all_reduce_is_unsupported(tmp_path):
    be = CpuBackend(cache_dir=tmp_path)
    h = be.allocate_buffer(16)
    p = isa.ProgramBuilder().add(isa.AllReduce(Address.buffer(h), 4, isa.ReduceOperation.Sum)).build()
    with pytest.raises(UnsupportedError):
        be.execute_program(p, LaunchConfig.linear(1))


def test_gemm_uses_blas_and_agrees(tmp_path):
    m, k, n = 17, 33, 9
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    outs = []
    for be in (CpuBackend(cache_dir=tmp_path), ReferenceBackend()):
        ha, hb, hc = (be.allocate_buffer(x) for x in (a.nbytes, b.nbytes, 4 * m * n))
        be.copy_to_buffer(ha, a), be.copy_to_buffer(hb, b)
        p = isa.ProgramBuilder().add(isa.GEMM(Address.buffer(hc), Address.buffer(ha), Address.buffer(hb), m, n, k)).build()
        be.execute_program(p, LaunchConfig.linear(1))
        c = np.zeros((m, n), np.float32)
        be.copy_from_buffer(hc, c)
        outs.append(c)
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5 * np.abs(a).max() * np.abs(b).max() * k)
    assert "BLAS" in CpuBackend(cache_dir=tmp_path).explain(p)


def test_fused_chain_agrees_with_the_reference(tmp_path):
    n = 1000
    x = np.linspace(-5, 5, n).astype(np.float32)
    outs = []
    for be in (CpuBackend(cache_dir=tmp_path), ReferenceBackend()):
        a, c = be.allocate_buffer(4 * n), be.allocate_buffer(4 * n)
        be.copy_to_buffer(a, x)
        A, C = Address.buffer(a), Address.buffer(c)
        M, B = isa.MapOperation, isa.BinaryMapOperation
        p = isa.ProgramBuilder().add(
            isa.ParallelMap(C, A, n, M.Exp), isa.ParallelMapBinary(C, C, A, n, B.Mul),
            isa.ParallelMap(C, C, n, M.Tanh), isa.ParallelMapBinary(C, C, A, n, B.Min)).build().optimize()
        assert any(isinstance(i, isa.FusedMap) for i in p.instructions)
        be.execute_program(p, LaunchConfig.linear(1))
        out = np.zeros(n, np.float32)
        be.copy_from_buffer(c, out)
        outs.append(out)
    # exp's F32 results are within 4 ULP of the reference's (docs/isa.md), the rest of the chain keeps that
    assert_values(outs[0].tolist(), outs[1].tolist(), F32, max_ulps=4)


def test_without_numba_everything_still_runs(tmp_path, monkeypatch):
    def no_numba():
        raise ImportError("No module named 'numba'")

    monkeypatch.setattr(cpu_module, "_NUMBA", [])
    monkeypatch.setattr(cpu_module, "_import_numba", no_numba)
    be = CpuBackend(cache_dir=tmp_path)
    caps = be.capabilities()
    assert caps["compiled"] is False and "numba" in caps["reason"] and be.is_available()
    assert "no numba" in be.explain(lane_program()) and "runs: interpreted" in be.explain(lane_program())
    n = 50
    x = np.linspace(-1, 1, n, dtype=np.float32)
    got, want, _ = run_both(lane_program(), n, {10: x}, 4 * n, backends=[be, ReferenceBackend()])
    assert got == want
    h = be.allocate_buffer(4 * n)
    be.copy_to_buffer(h, x)
    p = isa.ProgramBuilder().add(isa.ParallelMapBinary(Address.buffer(h), Address.buffer(h), Address.buffer(h), n,
                                                       isa.BinaryMapOperation.Add)).build()
    be.execute_program(p, LaunchConfig.linear(1))
    out = np.zeros(n, np.float32)
    be.copy_from_buffer(h, out)
    assert (out == 2 * x).all() and "NumPy" in be.explain(p)


def test_import_eidos_isa_does_not_import_numba():
    code = "import sys, eidos, eidos.isa, eidos.isa.backends; from eidos.isa.backends import CpuBackend; print('numba' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "False", r.stderr


def rotate_program() -> isa.Program:
    """Each lane writes its input to shared memory, waits, and stores its right neighbour's (in its block)."""
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(0), Special.GLOBAL_ID, U64), isa.MOV_IMM(R(1), 4, U64), isa.MUL(R(2), R(0), R(1), U64),
          isa.ADD(R(3), R(10), R(2), U64), isa.LDG(R(4), Address.register(R(3)), F32),
          isa.MOV(R(5), Special.THREAD_INDEX, U64), isa.MUL(R(6), R(5), R(1), U64),
          isa.STS(Address.register(R(6)), R(4), F32), isa.BarSync(0),
          isa.MOV_IMM(R(7), 1, U64), isa.ADD(R(8), R(5), R(7), U64), isa.MOV(R(9), Special.BLOCK_THREADS, U64),
          isa.REM(R(8), R(8), R(9), U64), isa.MUL(R(8), R(8), R(1), U64), isa.LDS(R(12), Address.register(R(8)), F32),
          isa.ADD(R(13), R(11), R(2), U64), isa.STG(Address.register(R(13)), R(12), F32))
    return b.build()


def test_blocks_in_parallel_with_barriers(tmp_path):
    block, blocks = 32, 40
    n = block * blocks
    x = np.arange(n, dtype=np.float32)
    cfg = LaunchConfig((blocks, 1, 1), (block, 1, 1), shared_memory=4 * block)
    got, want, be = run_both(rotate_program(), n, {10: x}, 4 * n, cfg,
                             backends=[CpuBackend(cache_dir=tmp_path), ReferenceBackend()])
    assert got == want
    params = ExecutionParams(cfg, {10: isa.pointer(1), 11: isa.pointer(2)})
    assert "blocks in parallel" in be.explain(rotate_program(), params)


POOL = 1024


def map_sum_program(n: int, ty: Type, free: bool = True, out_of_bounds: bool = False) -> isa.Program:
    """sum(exp(x * r8 + r9) * y) with the chain in pool POOL (freed after the sum when `free`), x and y in
    buffers 1 and 2, the sum stored to buffer 3."""
    M, B = isa.MapOperation, isa.BinaryMapOperation
    P, X, Y = Address.pool(POOL), Address.buffer(1, 4 if out_of_bounds else 0), Address.buffer(2)
    b = isa.ProgramBuilder().add(
        isa.PoolAlloc(POOL, n * ty.size_bytes),
        isa.ParallelMapBinary(P, X, R(8), n, B.Mul, ty), isa.ParallelMapBinary(P, P, R(9), n, B.Add, ty),
        isa.ParallelMap(P, P, n, M.Exp, ty), isa.ParallelMapBinary(P, P, Y, n, B.Mul, ty),
        isa.ParallelReduce(R(0), P, n, isa.ReduceOperation.Sum, ty))
    if free:
        b.add(isa.PoolFree(POOL))
    b.add(isa.STG(Address.buffer(3), R(0), ty))
    return b.build().optimize()


def run_map_sum(be, p, x, y, registers):
    for data in (x, y, np.zeros(1, x.dtype)):
        h = be.allocate_buffer(data.nbytes)
        be.copy_to_buffer(h, data)
    be.execute_program_with_params(p, ExecutionParams(LaunchConfig.linear(1), registers))
    out = np.zeros(1, x.dtype)
    be.copy_from_buffer(3, out)
    return out[0]


@pytest.mark.parametrize("ty", [Type.F32, Type.F64])
@pytest.mark.parametrize("n", [0, 7, 1000, (1 << 17) + 5])   # empty, short, one chunk, chunks over the threads
def test_a_map_and_its_sum_run_as_one_pass_within_the_reduction_bound(tmp_path, ty, n):
    """The map writes a pool freed right after the sum: the CPU backend sums while mapping (explain says so),
    and agrees with the reference within docs/isa.md's bound for sums (2 n eps S + 4 ULP)."""
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(ty.np_dtype), rng.random(n).astype(ty.np_dtype)
    p = map_sum_program(n, ty)
    be = CpuBackend(cache_dir=tmp_path)
    assert "one numba pass: the map's steps and the sum together" in be.explain(p)
    regs = {8: 0.5, 9: -1.25}
    got, want = run_map_sum(be, p, x, y, regs), run_map_sum(ReferenceBackend(), p, x, y, regs)
    terms = np.exp(x.astype(np.float64) * 0.5 - 1.25) * y
    eps = np.finfo(ty.np_dtype).eps
    assert abs(float(got) - float(want)) <= 2 * n * eps * float(np.abs(terms).sum()) + 4 * float(np.spacing(abs(want)))
    assert len(be._plans) == 1 and be.memory.pools == {}   # the pool was freed


def test_a_map_sum_keeps_ieee_infinities_and_nan_and_the_references_errors(tmp_path):
    n = 5000
    x, y = np.ones(n, np.float32), np.ones(n, np.float32)
    p = map_sum_program(n, F32)
    for value, check in ((1e30, np.isposinf), (np.nan, np.isnan)):
        x[17] = value
        for be in (CpuBackend(cache_dir=tmp_path), ReferenceBackend()):
            assert check(run_map_sum(be, p, x, y, {8: 1.0, 9: 0.0}))
    x[17], y[3] = 1.0, -np.inf
    assert np.isnan(run_map_sum(CpuBackend(cache_dir=tmp_path), p, x * 1e30, y, {8: 1.0, 9: 0.0}))  # inf - inf
    bad = map_sum_program(n, F32, out_of_bounds=True)
    errors = []
    for be in (CpuBackend(cache_dir=tmp_path), ReferenceBackend()):
        with pytest.raises(BackendError) as e:
            run_map_sum(be, bad, x, y, {})
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "needs bytes" in errors[0]


def test_a_map_whose_pool_stays_alive_is_not_fused(tmp_path):
    """Without the PoolFree the pool's contents are observable: the map stores them (and the sum reads them)."""
    n = 300
    x, y = np.linspace(-1, 1, n).astype(np.float32), np.full(n, 2, np.float32)
    p = map_sum_program(n, F32, free=False)
    outs = []
    for be in (CpuBackend(cache_dir=tmp_path), ReferenceBackend()):
        s = run_map_sum(be, p, x, y, {8: 3.0, 9: 1.0})
        pool = np.zeros(n, np.float32)
        be.copy_from_pool(POOL, 0, pool)
        outs.append((s, pool))
    assert "one numba pass" not in CpuBackend(cache_dir=tmp_path).explain(p)
    assert_values(outs[0][1].tolist(), outs[1][1].tolist(), F32, max_ulps=4)   # exp: within 4 ULP (docs/isa.md)
    assert abs(outs[0][0] - outs[1][0]) <= 4 * n * np.spacing(outs[1][0])


def test_scalar_operands_are_kernel_arguments(tmp_path):
    """A program of maps whose only register use is scalar operands runs as array kernels with the launch's
    starting registers; a new value needs no new program; a value that differs between lanes is an error."""
    n = 1000
    x = np.linspace(-3, 3, n).astype(np.float32)
    B = isa.BinaryMapOperation
    p = isa.ProgramBuilder().add(
        isa.ParallelMapBinary(Address.buffer(2), R(5), Address.buffer(1), n, B.Sub),
        isa.ParallelMapBinary(Address.buffer(2), Address.buffer(2), R(6), n, B.Max)).build().optimize()
    cpu, ref = CpuBackend(cache_dir=tmp_path), ReferenceBackend()
    text = cpu.explain(p)
    assert "runs: array" in text and "2 scalar operand(s)" in text
    for be in (cpu, ref):
        for data in (x, np.zeros(n, np.float32)):
            be.copy_to_buffer(be.allocate_buffer(data.nbytes), data)
    for c in (0.5, 2.0):
        outs = []
        for be in (cpu, ref):
            be.execute_program_with_params(p, ExecutionParams(LaunchConfig.linear(1), {5: c, 6: -1.0}))
            out = np.zeros(n, np.float32)
            be.copy_from_buffer(2, out)
            outs.append(out)
        assert outs[0].tobytes() == outs[1].tobytes()
        np.testing.assert_array_equal(outs[0], np.maximum(np.float32(c) - x, np.float32(-1)))
    assert len(cpu._plans) == 1
    lanes = isa.ProgramBuilder().add(isa.MOV(R(1), Special.GLOBAL_ID, U64), isa.CVT(R(5), R(1), U64, F32),
                                     *p.instructions).build()
    for be in (cpu, ref):
        with pytest.raises(BackendError, match="differs between threads"):
            be.execute_program_with_params(lanes, ExecutionParams(LaunchConfig.linear(2), {6: 0.0}))
