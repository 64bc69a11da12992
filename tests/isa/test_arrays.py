"""Array (collective) instructions: every Map/BinaryMap/Reduce operation with every type it takes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eidos import isa
from eidos.errors import BackendError
from eidos.isa import Address, BinaryMapOperation, LaunchConfig, MapOperation, ReduceOperation, Register, Type
from eidos.isa.instructions import FLOAT_ONLY_BINARY_MAPS, FLOAT_ONLY_MAPS
from tests.isa.harness import assert_values, decode, encode, round_to
from tests.isa.values import FLOATS, SMALL_INTS, values

NUMPY_TYPES = FLOATS + SMALL_INTS
TRANSCENDENTAL = {MapOperation.Exp, MapOperation.Log, MapOperation.Sin, MapOperation.Cos, MapOperation.Tan,
                  MapOperation.Sigmoid, MapOperation.Tanh, BinaryMapOperation.Pow, BinaryMapOperation.Atan2}


def _buffers(backend, ty, *arrays, extra=0):
    hs = []
    for a in arrays:
        h = backend.allocate_buffer(ty.size_bytes * len(a) + extra)
        backend.copy_to_buffer(h, encode(a, ty))
        hs.append(h)
    return hs


def _get(backend, h, ty, n):
    data = bytearray(ty.size_bytes * n)
    backend.copy_from_buffer(h, data)
    return decode(bytes(data), ty)


def _np_map(op, x, ty):
    if not ty.is_float:
        f = {MapOperation.Abs: lambda v: abs(v), MapOperation.Neg: lambda v: -v,
             MapOperation.Relu: lambda v: max(v, 0)}[op]
        return round_to([f(v) for v in x], ty)
    a = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        r = {MapOperation.Abs: np.abs, MapOperation.Neg: np.negative, MapOperation.Sqrt: np.sqrt,
             MapOperation.Exp: np.exp, MapOperation.Log: np.log, MapOperation.Sin: np.sin, MapOperation.Cos: np.cos,
             MapOperation.Tan: np.tan, MapOperation.Relu: lambda v: np.where(np.isnan(v) | (v > 0), v, 0.0),
             MapOperation.Sigmoid: lambda v: 1 / (1 + np.exp(-v)), MapOperation.Tanh: np.tanh}[op](a)
    return round_to(r.tolist(), ty)


def _ops(enum, float_only, ty):
    return [op for op in enum if ty.is_float or op not in float_only]


CASES_MAP = [(op, ty) for ty in NUMPY_TYPES for op in _ops(MapOperation, FLOAT_ONLY_MAPS, ty)]
CASES_BIN = [(op, ty) for ty in NUMPY_TYPES for op in _ops(BinaryMapOperation, FLOAT_ONLY_BINARY_MAPS, ty)]


@pytest.mark.parametrize("op,ty", CASES_MAP, ids=lambda v: str(getattr(v, "value", v)))
def test_parallel_map(backend, op, ty):
    x = [v for v in values(ty, 32) if not (op in (MapOperation.Sin, MapOperation.Cos, MapOperation.Tan) and
                                           ty.is_float and abs(v) > 1e6)]
    src, dst = _buffers(backend, ty, x, x)
    p = isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(dst), Address.buffer(src), len(x), op, ty)).build()
    backend.execute_program(p, LaunchConfig.linear(len(x)))
    assert_values(_get(backend, dst, ty, len(x)), _np_map(op, x, ty), ty, max_ulps=4 if op in TRANSCENDENTAL else 0,
                  context=op)


def _np_bin(op, a, b, ty):
    if not ty.is_float:
        from tests.isa.test_scalar import expected_binary
        name = {BinaryMapOperation.Add: "ADD", BinaryMapOperation.Sub: "SUB", BinaryMapOperation.Mul: "MUL",
                BinaryMapOperation.Div: "DIV", BinaryMapOperation.Min: "MIN", BinaryMapOperation.Max: "MAX"}[op]
        return [expected_binary(name, ty, x, y) for x, y in zip(a, b)]
    if op in (BinaryMapOperation.Min, BinaryMapOperation.Max):
        from tests.isa.test_scalar import _fmin
        return [_fmin(x, y, op is BinaryMapOperation.Min) for x, y in zip(a, b)]
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(all="ignore"):
        r = {BinaryMapOperation.Add: np.add, BinaryMapOperation.Sub: np.subtract, BinaryMapOperation.Mul: np.multiply,
             BinaryMapOperation.Div: np.divide, BinaryMapOperation.Pow: np.power,
             BinaryMapOperation.Atan2: np.arctan2}[op](x, y)
    return round_to(r.tolist(), ty)


@pytest.mark.parametrize("op,ty", CASES_BIN, ids=lambda v: str(getattr(v, "value", v)))
def test_parallel_map_binary(backend, op, ty):
    from tests.isa.values import pairs
    a, b = pairs(ty, 32)
    ha, hb, hc = _buffers(backend, ty, a, b, a)
    p = isa.ProgramBuilder().add(isa.ParallelMapBinary(Address.buffer(hc), Address.buffer(ha), Address.buffer(hb),
                                                       len(a), op, ty)).build()
    backend.execute_program(p, LaunchConfig.linear(4))
    assert_values(_get(backend, hc, ty, len(a)), _np_bin(op, a, b, ty), ty,
                  max_ulps=4 if op in TRANSCENDENTAL else 0, context=op)


def _expected_reduce(op, x, ty):
    if ty.is_integer:
        if op is ReduceOperation.Sum:
            return round_to([sum(x)], ty)[0]
        if op is ReduceOperation.Product:
            return round_to([math.prod(x)], ty)[0]
        return (min if op is ReduceOperation.Min else max)(x) if x else (ty.max_value if op is ReduceOperation.Min else ty.min_value)
    a = np.asarray(x, dtype=np.float64)
    if op is ReduceOperation.Sum:
        return round_to([math.fsum(x)], ty)[0]
    if op is ReduceOperation.Product:
        return round_to([float(np.prod(a))], ty)[0]
    return round_to([float((np.min if op is ReduceOperation.Min else np.max)(a))], ty)[0] if x else \
        (math.inf if op is ReduceOperation.Min else -math.inf)


REDUCERS = {ReduceOperation.Sum: isa.ReduceAdd, ReduceOperation.Product: isa.ReduceMul,
            ReduceOperation.Min: isa.ReduceMin, ReduceOperation.Max: isa.ReduceMax}


@pytest.mark.parametrize("ty", NUMPY_TYPES, ids=str)
@pytest.mark.parametrize("op", list(ReduceOperation), ids=lambda o: o.value)
@pytest.mark.parametrize("form", ["ParallelReduce", "ReduceX"])
def test_reductions_reach_every_lane(backend, form, op, ty):
    x = [v for v in values(ty, 20) if not (ty.is_float and (math.isinf(v) or math.isnan(v) or abs(v) > 1e4))][:12]
    if op is ReduceOperation.Product and ty.is_float:
        x = [v for v in x if abs(v) < 4][:8]
    src, out = _buffers(backend, ty, x, [0] * 6)
    b = isa.ProgramBuilder()
    if form == "ParallelReduce":
        b.add(isa.ParallelReduce(Register(0), Address.buffer(src), len(x), op, ty))
    else:
        b.add(REDUCERS[op](Register(0), Address.buffer(src), len(x), ty))
    from tests.isa.harness import ADDR, lane_address
    b.add(isa.MOV_IMM(Register(9), isa.pointer(out), Type.U64), *lane_address(Register(9), ty.size_bytes),
          isa.STG(Address.register(ADDR), Register(0), ty))
    backend.execute_program(b.build(), LaunchConfig.linear(6))
    want = _expected_reduce(op, x, ty)
    got = _get(backend, out, ty, 6)
    tol = 0 if ty.is_integer or op in (ReduceOperation.Min, ReduceOperation.Max, ReduceOperation.Sum) else 2
    assert_values(got, [want] * 6, ty, max_ulps=tol, context=(op, x))


@pytest.mark.parametrize("op", list(ReduceOperation), ids=lambda o: o.value)
def test_empty_reductions(backend, op):
    src, out = _buffers(backend, Type.F32, [0.0], [0.0])
    b = isa.ProgramBuilder().add(isa.ParallelReduce(Register(0), Address.buffer(src), 0, op, Type.F32),
                                 isa.STG(Address.buffer(out), Register(0), Type.F32))
    backend.execute_program(b.build(), LaunchConfig.linear(1))
    want = {ReduceOperation.Sum: 0.0, ReduceOperation.Product: 1.0, ReduceOperation.Min: math.inf,
            ReduceOperation.Max: -math.inf}[op]
    assert _get(backend, out, Type.F32, 1) == [want]


def test_collective_with_register_address_and_class_memory(backend):
    x = np.arange(8, dtype=np.float32)
    backend.copy_to_class(10, 100, x)
    out = backend.allocate_buffer(32)
    b = isa.ProgramBuilder().add(
        isa.MOV_IMM(Register(3), isa.pointer(out), Type.U64),
        isa.ParallelMap(Address.register(Register(3)), Address.cls(10, 100), 8, MapOperation.Neg))
    backend.execute_program(b.build(), LaunchConfig.linear(4))
    assert _get(backend, out, Type.F32, 8) == (-x).tolist()


def test_collective_address_must_agree_across_lanes(backend):
    buf = backend.allocate_buffer(64)
    b = isa.ProgramBuilder().add(
        isa.MOV(Register(1), isa.Special.GLOBAL_ID, Type.U64), isa.MOV_IMM(Register(2), isa.pointer(buf), Type.U64),
        isa.ADD(Register(3), Register(1), Register(2), Type.U64),
        isa.ParallelMap(Address.register(Register(3)), Address.buffer(buf), 4, MapOperation.Neg))
    with pytest.raises(BackendError, match="differs between threads"):
        backend.execute_program(b.build(), LaunchConfig.linear(2))


def test_partial_overlap_is_rejected(backend):
    (buf,) = _buffers(backend, Type.F32, [1.0] * 16)
    p = isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(buf, 4), Address.buffer(buf), 8, MapOperation.Neg)).build()
    with pytest.raises(BackendError, match="partially overlaps"):
        backend.execute_program(p, LaunchConfig.linear(1))


def test_array_out_of_bounds(backend):
    (buf,) = _buffers(backend, Type.F32, [1.0] * 4)
    p = isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(buf), Address.buffer(buf), 5, MapOperation.Neg)).build()
    with pytest.raises(BackendError, match="needs bytes 0..20 but its memory has 16"):
        backend.execute_program(p, LaunchConfig.linear(1))


def test_api_example(backend):
    be = backend
    a, b, c = (be.allocate_buffer(1024) for _ in range(3))
    be.copy_to_buffer(a, np.arange(256, dtype=np.float32))
    be.copy_to_buffer(b, np.arange(256, dtype=np.float32) * 2)
    prog = (isa.ProgramBuilder()
            .add(isa.ParallelMapBinary(dst_array=Address.buffer(c), src_a=Address.buffer(a), src_b=Address.buffer(b),
                                       count=256, operation=BinaryMapOperation.Add, ty=Type.F32))
            .add(isa.ParallelMap(dst_array=Address.buffer(c), src_array=Address.buffer(c), count=256,
                                 operation=MapOperation.Relu, ty=Type.F32))
            .build())
    be.execute_program(prog, LaunchConfig.linear(256))
    out = np.empty(256, dtype=np.float32)
    be.copy_from_buffer(c, out)
    np.testing.assert_array_equal(out, np.arange(256, dtype=np.float32) * 3)
