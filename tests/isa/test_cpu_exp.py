"""The CPU backend's exp (runtime.vexpf for float32, computed in float32; runtime.vexp for float64; both
polynomials that vectorize) against the reference (binary64 exp, rounded once for float32): within docs/isa.md's 4 ULP everywhere, NaN, infinities, overflow, underflow
to subnormals and zero, and -0.0 exactly as the reference gives them. Checked on a dense sweep of float32
bit patterns, on the ranges where results overflow or become subnormal, and on generated inputs through
the single-map loop and the fused-chain loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from eidos import isa
from eidos.isa import Address, ExecutionParams, LaunchConfig, Type
from eidos.isa import Register as R
from eidos.isa.backends.reference import ReferenceBackend
from tests.isa.harness import ulps_array

pytest.importorskip("numba")
from eidos.isa.backends.cpu import CpuBackend  # noqa: E402
from eidos.isa.backends.cpu.arrays import FUSE_MIN  # noqa: E402
from eidos.testing.strategies import examples

M, B, F32 = isa.MapOperation, isa.BinaryMapOperation, Type.F32
SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, np.finfo(np.float32).max,
                     -np.finfo(np.float32).max, np.finfo(np.float32).tiny, np.finfo(np.float32).smallest_subnormal,
                     88.72283, 88.722832, 88.72284, 88.7229, 89.0, 89.5, -87.33654, -87.34, -103.27893, -103.97208,
                     -103.972084, -104.0, -104.5, -150.0], np.float32)


def run(be, p: isa.Program, x: np.ndarray, registers: dict | None = None) -> np.ndarray:
    for h, data in ((1, x), (2, np.zeros_like(x))):
        assert be.allocate_buffer(data.nbytes) == h
        be.copy_to_buffer(h, data)
    be.execute_program_with_params(p, ExecutionParams(LaunchConfig.linear(1), registers or {}))
    out = np.zeros_like(x)
    be.copy_from_buffer(2, out)
    return out


def exp_program(n: int, ty: Type = F32) -> isa.Program:
    return isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(2), Address.buffer(1), n, M.Exp, ty)).build()


def chain_program(n: int, ty: Type = F32) -> isa.Program:
    """exp(x * r8 + r9): one FusedMap with scalar operands (the tensor layer's form of x * 2 + 1 then exp)."""
    X, Y = Address.buffer(1), Address.buffer(2)
    return isa.ProgramBuilder().add(
        isa.ParallelMapBinary(Y, X, R(8), n, B.Mul, ty), isa.ParallelMapBinary(Y, Y, R(9), n, B.Add, ty),
        isa.ParallelMap(Y, Y, n, M.Exp, ty)).build().optimize()


def assert_within_4_ulp(x, got, want) -> None:
    d = ulps_array(got, want)
    bad = np.flatnonzero(d > 4)
    assert bad.size == 0, (f"{bad.size} results beyond 4 ULP, first (x, got, want): "
                           f"{list(zip(x[bad[:5]], got[bad[:5]], want[bad[:5]]))}")
    # what the ULP distance cannot say: NaN for NaN only, infinities and zeros where the reference has them
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


def sweep() -> np.ndarray:
    """Every 4,099th float32 bit pattern (both signs, NaNs and infinities included), every float32 where
    exp overflows or becomes subnormal or zero (88.0 to 89.5, -87.5 to -104.5, every 3rd), and the specials."""
    strided = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)

    def every(lo, hi, step=1):
        a, b = np.float32(lo).view(np.int32), np.float32(hi).view(np.int32)
        return np.arange(min(a, b), max(a, b) + 1, step, dtype=np.int32).view(np.float32)
    return np.concatenate([strided, every(88.0, 89.5), every(-87.5, -104.5, 3), SPECIALS])


def test_exp_f32_dense_sweep_within_4_ulp_of_the_reference(tmp_path):
    x = sweep()
    p = exp_program(len(x))
    cpu = CpuBackend(cache_dir=tmp_path)
    got, want = run(cpu, p, x), run(ReferenceBackend(), p, x)
    assert_within_4_ulp(x, got, want)
    assert ulps_array(got, want).max() <= 1   # what vexpf's docstring promises (every float32 was checked once)
    # the edge cases, exactly: -0.0 -> 1, -inf -> 0, inf -> inf, NaN -> NaN, overflow -> inf, deep underflow -> 0
    got = run(CpuBackend(cache_dir=tmp_path), exp_program(len(SPECIALS)), SPECIALS)

    def e(v):   # the result for the special input v (bit for bit: -0.0 is not 0.0 here)
        return got[np.flatnonzero(SPECIALS.view(np.int32) == np.float32(v).view(np.int32))[0]]
    assert e(-0.0) == 1.0 and e(0.0) == 1.0 and e(-np.inf) == 0.0 and e(np.inf) == np.inf and np.isnan(e(np.nan))
    assert e(89.0) == np.inf and e(88.72284) == np.inf and np.isfinite(e(88.72283))  # the largest finite result
    assert e(-104.5) == 0.0 and e(-150.0) == 0.0
    assert 0 < e(-103.27893) < np.finfo(np.float32).tiny   # a subnormal result, not flushed to zero


FLOATS32 = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(x=hnp.arrays(np.float32, st.integers(1, 2 * FUSE_MIN), elements=FLOATS32),
       a=st.floats(-4, 4, width=32), b=st.floats(-90, 90, width=32))
def test_exp_f32_generated_inputs_single_and_fused(tmp_path, x, a, b):
    """Any float32 inputs, through the single-map loop and through the fused chain exp(x * a + b) (the
    fused loop from FUSE_MIN elements, the per-step tables below it)."""
    cpu, ref = CpuBackend(cache_dir=tmp_path), ReferenceBackend()
    p = exp_program(len(x))
    assert_within_4_ulp(x, run(cpu, p, x), run(ref, p, x))
    q, regs = chain_program(len(x)), {8: float(a), 9: float(b)}
    assert_within_4_ulp(x, run(CpuBackend(cache_dir=tmp_path), q, x, regs), run(ReferenceBackend(), q, x, regs))


def sweep64() -> np.ndarray:
    """float64: uniform over the whole range where exp is finite and nonzero, around 0, every float64 in windows
    at the overflow and underflow thresholds, the subnormal results, and the specials."""
    rng = np.random.default_rng(5)
    over, under = np.float64(709.782712893384), np.float64(-745.1332191019411)
    window = np.arange(-2000, 2000)
    return np.concatenate([rng.uniform(-746, 710, 400_000), rng.standard_normal(100_000), rng.uniform(-1e-8, 1e-8, 10_000),
                           (over.view(np.int64) + window).view(np.float64), (under.view(np.int64) + window).view(np.float64),
                           np.linspace(-745.2, -708.3, 100_000), SPECIALS.astype(np.float64),
                           np.array([1e308, -1e308, 5e-324, -5e-324, 710.0, -746.0, -760.0])])


def test_exp_f64_sweep_within_4_ulp_of_the_reference(tmp_path):
    x = sweep64()
    p = exp_program(len(x), Type.F64)
    got, want = run(CpuBackend(cache_dir=tmp_path), p, x), run(ReferenceBackend(), p, x)
    assert_within_4_ulp(x, got, want)
    assert ulps_array(got, want).max() <= 2    # vexp's docstring
    edge = np.array([-746.0, -760.0, 710.0, -0.0, -5e-324, -740.0, np.inf, -np.inf, np.nan])
    e = run(CpuBackend(cache_dir=tmp_path), exp_program(len(edge), Type.F64), edge)
    assert e[0] == 0 and e[1] == 0 and e[2] == np.inf and e[3] == 1 and e[4] == 1 and e[6] == np.inf and e[7] == 0
    assert 0 < e[5] < np.finfo(np.float64).tiny and np.isnan(e[8])   # a subnormal result, not flushed to zero


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(x=hnp.arrays(np.float64, st.integers(1, 2 * FUSE_MIN), elements=st.floats(allow_nan=True, allow_infinity=True)),
       a=st.floats(-4, 4), b=st.floats(-700, 700))
def test_exp_f64_generated_inputs_single_and_fused(tmp_path, x, a, b):
    cpu, ref = CpuBackend(cache_dir=tmp_path), ReferenceBackend()
    p = exp_program(len(x), Type.F64)
    assert_within_4_ulp(x, run(cpu, p, x), run(ref, p, x))
    q, regs = chain_program(len(x), Type.F64), {8: a, 9: b}
    assert_within_4_ulp(x, run(CpuBackend(cache_dir=tmp_path), q, x, regs), run(ReferenceBackend(), q, x, regs))


@pytest.mark.parametrize("which", ["sweep", "specials"])
def test_sigmoid_f32_through_vexpf_within_4_ulp_of_the_reference(tmp_path, which):
    """F32 Sigmoid computes its exp with vexpf (runtime.asigmoid32): within 4 ULP of the reference on the dense
    sweep (NaN, infinities, zeros and the saturating ranges included)."""
    x = sweep() if which == "sweep" else SPECIALS
    p = isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(2), Address.buffer(1), len(x), M.Sigmoid, F32)).build()
    got, want = run(CpuBackend(cache_dir=tmp_path), p, x), run(ReferenceBackend(), p, x)
    assert_within_4_ulp(x, got, want)
    assert ulps_array(got, want).max() <= 3
