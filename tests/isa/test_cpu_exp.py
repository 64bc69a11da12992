"""The CPU backend's float32 exp (runtime.vexpf, computed in float32 so it vectorizes) against the reference
(binary64 exp rounded once): within docs/isa.md's 4 ULP everywhere, NaN, infinities, overflow, underflow
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
from tests.isa.harness import ulps_f32

pytest.importorskip("numba")
from eidos.isa.backends.cpu import CpuBackend  # noqa: E402
from eidos.isa.backends.cpu.kernels import FUSE_MIN  # noqa: E402

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


def exp_program(n: int) -> isa.Program:
    return isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(2), Address.buffer(1), n, M.Exp, F32)).build()


def chain_program(n: int) -> isa.Program:
    """exp(x * r8 + r9): one FusedMap with scalar operands (the tensor layer's form of x * 2 + 1 then exp)."""
    X, Y = Address.buffer(1), Address.buffer(2)
    return isa.ProgramBuilder().add(
        isa.ParallelMapBinary(Y, X, R(8), n, B.Mul, F32), isa.ParallelMapBinary(Y, Y, R(9), n, B.Add, F32),
        isa.ParallelMap(Y, Y, n, M.Exp, F32)).build().optimize()


def assert_within_4_ulp(x, got, want) -> None:
    d = ulps_f32(got, want)
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
    assert ulps_f32(got, want).max() <= 1   # what vexpf's docstring promises (every float32 was checked once)
    # the edge cases, exactly: -0.0 -> 1, -inf -> 0, inf -> inf, NaN -> NaN, overflow -> inf, deep underflow -> 0
    got = run(CpuBackend(cache_dir=tmp_path), exp_program(len(SPECIALS)), SPECIALS)

    def e(v):   # the result for the special input v (bit for bit: -0.0 is not 0.0 here)
        return got[np.flatnonzero(SPECIALS.view(np.int32) == np.float32(v).view(np.int32))[0]]
    assert e(-0.0) == 1.0 and e(0.0) == 1.0 and e(-np.inf) == 0.0 and e(np.inf) == np.inf and np.isnan(e(np.nan))
    assert e(89.0) == np.inf and e(88.72284) == np.inf and np.isfinite(e(88.72283))  # the largest finite result
    assert e(-104.5) == 0.0 and e(-150.0) == 0.0
    assert 0 < e(-103.27893) < np.finfo(np.float32).tiny   # a subnormal result, not flushed to zero


FLOATS32 = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
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
