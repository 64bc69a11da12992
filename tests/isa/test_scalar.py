"""Every per-lane register instruction with every type it takes, against independent answers."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from eidos import isa
from eidos.isa import Condition, Predicate, Register, Type
from tests.isa.harness import assert_values, round_to, run_lanes, ulp_of
from tests.isa.values import ALL, FLOATS, INTS, pairs, values

r0, r1, r2, r3 = (Register(i) for i in range(4))


def _wrap(ty, v):
    return round_to([v], ty)[0]


def _fmin(a, b, pick_min):
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b:
        neg = math.copysign(1, a) < 0
        return (a if neg else b) if pick_min else (b if neg else a)
    return min(a, b) if pick_min else max(a, b)


def _trunc_div(a, b):
    return math.trunc(Fraction(a, b))


def expected_binary(op: str, ty: Type, a, b):
    if ty.is_float:
        with np.errstate(all="ignore"):
            x, y = np.float64(a), np.float64(b)
            v = {"ADD": x + y, "SUB": x - y, "MUL": x * y, "DIV": np.divide(x, y), "REM": np.fmod(x, y)}.get(op)
        if op in ("MIN", "MAX"):
            return _fmin(a, b, op == "MIN")
        return round_to([float(v)], ty)[0]
    if op == "DIV":
        return _wrap(ty, -1) if b == 0 else _wrap(ty, _trunc_div(a, b))
    if op == "REM":
        return a if b == 0 else _wrap(ty, a - b * _trunc_div(a, b))
    bits = ty.bits
    v = {"ADD": lambda: a + b, "SUB": lambda: a - b, "MUL": lambda: a * b, "MIN": lambda: min(a, b),
         "MAX": lambda: max(a, b), "AND": lambda: a & b, "OR": lambda: a | b, "XOR": lambda: a ^ b,
         "SHL": lambda: a << (b % bits), "SHR": lambda: a >> (b % bits)}[op]()
    return _wrap(ty, v)


ARITH = ["ADD", "SUB", "MUL", "DIV", "REM", "MIN", "MAX"]
LOGIC = ["AND", "OR", "XOR", "SHL", "SHR"]


@pytest.mark.parametrize("ty", ALL, ids=str)
@pytest.mark.parametrize("op", ARITH)
def test_arithmetic(backend, op, ty):
    a, b = pairs(ty)
    cls = getattr(isa, op)
    got = run_lanes(backend, [cls(r0, r1, r2, ty)], [ty, ty], [a, b], ty)
    assert_values(got, [expected_binary(op, ty, x, y) for x, y in zip(a, b)], ty, context=(op, list(zip(a, b))[:3]))


@pytest.mark.parametrize("ty", INTS, ids=str)
@pytest.mark.parametrize("op", LOGIC)
def test_logic_and_shifts(backend, op, ty):
    a, b = pairs(ty)
    if op in ("SHL", "SHR"):
        b = [v % (ty.bits + 5) if ty.is_unsigned else (v % (ty.bits + 5)) - 2 for v in b]
        b = round_to(b, ty)
        ins = getattr(isa, op)(r0, r1, r2, ty)
    else:
        ins = getattr(isa, op)(r0, r1, r2, ty)
    got = run_lanes(backend, [ins], [ty, ty], [a, b], ty)
    assert_values(got, [expected_binary(op, ty, x, y) for x, y in zip(a, b)], ty)


@pytest.mark.parametrize("ty", INTS, ids=str)
def test_not(backend, ty):
    a = values(ty)
    got = run_lanes(backend, [isa.NOT(r0, r1, ty)], [ty], [a], ty)
    assert_values(got, [_wrap(ty, ~x) for x in a], ty)


@pytest.mark.parametrize("ty", ALL, ids=str)
@pytest.mark.parametrize("op", ["ABS", "NEG", "SIGN"])
def test_abs_neg_sign(backend, op, ty):
    a = values(ty)
    got = run_lanes(backend, [getattr(isa, op)(r0, r1, ty)], [ty], [a], ty)
    if ty.is_float:
        f = {"ABS": abs, "NEG": lambda x: -x,
             "SIGN": lambda x: x if math.isnan(x) else float((x > 0) - (x < 0))}[op]
        want = [f(x) for x in a]
    else:
        want = [_wrap(ty, {"ABS": abs, "NEG": lambda x: -x, "SIGN": lambda x: (x > 0) - (x < 0)}[op](x)) for x in a]
    assert_values(got, want, ty)


_NP = {"EXP": np.exp, "LOG": np.log, "SQRT": np.sqrt, "SIN": np.sin, "COS": np.cos, "TAN": np.tan, "TANH": np.tanh,
       "SIGMOID": lambda x: 1 / (1 + np.exp(-x)), "RCP": lambda x: 1 / x, "RSQRT": lambda x: 1 / np.sqrt(x),
       "FLOOR": np.floor, "CEIL": np.ceil, "ROUND": np.round, "TRUNC": np.trunc,
       "GELU": lambda x: x * (1 + np.vectorize(math.erf)(x / np.sqrt(2))) / 2,
       "SWISH": lambda x: x / (1 + np.exp(-x))}
EXACT = {"SQRT", "RCP", "FLOOR", "CEIL", "ROUND", "TRUNC"}


@pytest.mark.parametrize("ty", FLOATS, ids=str)
@pytest.mark.parametrize("op", sorted(_NP))
def test_float_functions(backend, op, ty):
    a = [x for x in values(ty) if not (op in ("TAN", "SIN", "COS") and abs(x) > 1e6)]
    got = run_lanes(backend, [getattr(isa, op)(r0, r1, ty)], [ty], [a], ty)
    with np.errstate(all="ignore"):
        want = round_to(_NP[op](np.asarray(a, dtype=np.float64)).tolist(), ty)
    assert_values(got, want, ty, max_ulps=0 if op in EXACT else 4, context=op)


@pytest.mark.parametrize("ty", ALL, ids=str)
@pytest.mark.parametrize("op", ["FMA", "FMS", "MAD", "CLAMP", "LERP"])
def test_three_operand(backend, op, ty):
    if op == "LERP" and ty.is_integer:
        pytest.skip("LERP takes floats")
    a, b = pairs(ty, 30)
    c = values(ty, len(a), seed=7)[:len(a)]
    while len(c) < len(a):
        c.append(c[len(c) % 5])
    cls = getattr(isa, op)
    ins = cls(r0, r1, r2, r3, ty)
    got = run_lanes(backend, [ins], [ty, ty, ty], [a, b, c], ty)
    want = []
    for x, y, z in zip(a, b, c):
        if ty.is_integer:
            want.append(_wrap(ty, {"FMA": x * y + z, "MAD": x * y + z, "FMS": x * y - z,
                                   "CLAMP": min(max(x, y), z), "LERP": 0}[op]))
        elif op == "CLAMP":
            want.append(_fmin(_fmin(x, y, False), z, True))
        elif op == "MAD":
            with np.errstate(all="ignore"):
                want.append(round_to([round_to([x * y], ty)[0] + z], ty)[0])
        elif op == "LERP":
            with np.errstate(all="ignore"):
                d = round_to([y - x], ty)[0]
                want.append(round_to([x + round_to([d * z], ty)[0]], ty)[0])
        else:
            want.append(None)
    if ty.is_float and op in ("FMA", "FMS"):
        # Checked against the exact rational result: within half an ULP means correctly rounded.
        for g, x, y, z in zip(got, a, b, c):
            if all(math.isfinite(v) for v in (x, y, z)) and math.isfinite(g):
                exact = Fraction(x) * Fraction(y) + (-Fraction(z) if op == "FMS" else Fraction(z))
                err = abs(Fraction(g) - exact)
                step = abs(Fraction(round_to([float(np.nextafter(g, np.inf))], ty)[0]) - Fraction(g)) if ty is Type.F64 \
                    else Fraction(ulp_of(g, ty))
                assert err <= step / 2, (op, x, y, z, g)
        return
    assert_values(got, want, ty, context=op)


@pytest.mark.parametrize("ty", [Type.I8, Type.U32, Type.I256, Type.F32, Type.F64, Type.F16], ids=str)
@pytest.mark.parametrize("cond", list(Condition), ids=lambda c: c.value)
def test_setcc_and_sel(backend, cond, ty):
    a, b = pairs(ty)
    body = [isa.SETcc(Predicate(3), r1, r2, cond, ty), isa.SEL(r0, Predicate(3), r1, r2, ty)]
    got = run_lanes(backend, body, [ty, ty], [a, b], ty)
    f = {"EQ": lambda x, y: x == y, "NE": lambda x, y: x != y, "LT": lambda x, y: x < y, "LE": lambda x, y: x <= y,
         "GT": lambda x, y: x > y, "GE": lambda x, y: x >= y}[cond.value]
    assert_values(got, [x if f(x, y) else y for x, y in zip(a, b)], ty)


CVT_TYPES = [Type.F16, Type.BF16, Type.F32, Type.F64, Type.I8, Type.U8, Type.I32, Type.U32, Type.I64, Type.U64,
             Type.I128, Type.U256]


def expected_cvt(v, src: Type, dst: Type):
    if dst.is_float:
        if src.is_float:
            return round_to([v], dst)[0]
        return round_to([float(Fraction(v))], dst)[0] if abs(v) < 2 ** 60 else None
    if src.is_integer:
        return _wrap(dst, v)
    if math.isnan(v):
        return 0
    return max(dst.min_value, min(dst.max_value, int(v))) if math.isfinite(v) else (dst.max_value if v > 0 else dst.min_value)


@pytest.mark.parametrize("dst", CVT_TYPES, ids=str)
@pytest.mark.parametrize("src", CVT_TYPES, ids=str)
def test_cvt(backend, src, dst):
    a = values(src, 20)
    got = run_lanes(backend, [isa.CVT(r0, r1, src, dst)], [src], [a], dst)
    want = [expected_cvt(v, src, dst) for v in a]
    keep = [i for i, w in enumerate(want) if w is not None]
    assert_values([got[i] for i in keep], [want[i] for i in keep], dst, context=(src, dst))


@pytest.mark.parametrize("ty", ALL, ids=str)
def test_mov_and_mov_imm(backend, ty):
    a = values(ty, 8)
    imm = ty.max_value if ty.is_integer else -2.5
    body = [isa.MOV_IMM(r3, imm, ty), isa.MOV(r0, r1, ty), isa.SUB(r0, r0, r3, ty), isa.ADD(r0, r0, r3, ty)]
    got = run_lanes(backend, body, [ty], [a], ty)
    if ty.is_float:
        want = round_to([round_to([x - imm], ty)[0] + imm for x in a], ty)
    else:
        want = a
    assert_values(got, want, ty)


@pytest.mark.parametrize("special,expect", [
    (isa.Special.GLOBAL_ID, lambda g, t, b: g), (isa.Special.THREAD_INDEX, lambda g, t, b: t),
    (isa.Special.BLOCK_INDEX, lambda g, t, b: b), (isa.Special.LANE_COUNT, lambda g, t, b: 24),
    (isa.Special.BLOCK_THREADS, lambda g, t, b: 8), (isa.Special.THREAD_X, lambda g, t, b: t % 4),
    (isa.Special.THREAD_Y, lambda g, t, b: t // 4), (isa.Special.BLOCK_X, lambda g, t, b: b),
    (isa.Special.BLOCK_DIM_Y, lambda g, t, b: 2), (isa.Special.GRID_DIM_X, lambda g, t, b: 3),
], ids=lambda v: getattr(v, "value", ""))
def test_special_values(backend, special, expect):
    from tests.isa.harness import ADDR, lane_address
    out = backend.allocate_buffer(24 * 4)
    p = isa.ProgramBuilder().add(isa.MOV_IMM(Register(9), isa.pointer(out), Type.U64), *lane_address(Register(9), 4),
                                 isa.MOV(r0, special, Type.U32), isa.STG(isa.Address.register(ADDR), r0, Type.U32)).build()
    backend.execute_program(p, isa.LaunchConfig(grid=(3, 1, 1), block=(4, 2, 1)))
    got = np.empty(24, np.uint32)
    backend.copy_from_buffer(out, got)
    assert got.tolist() == [expect(g, g % 8, g // 8) for g in range(24)]
