"""Run instructions on a backend with per-lane inputs and outputs, and compare values by type."""

from __future__ import annotations

import math

import numpy as np

from eidos import isa
from eidos.isa import Address, ExecutionParams, LaunchConfig, Register, Special, Type

# Harness registers: r240 lane index, r241 scratch, r242 address, r255 down: base pointers.
GID, SCRATCH, ADDR = Register(240), Register(241), Register(242)
U64 = Type.U64


def encode(values, ty: Type) -> bytes:
    if ty.is_extended:
        return b"".join(int(v).to_bytes(ty.size_bytes, "little", signed=ty.is_signed) for v in values)
    if ty is Type.BF16:
        return np.asarray(values, dtype=np.float32).astype(ty.np_dtype).tobytes()
    return np.array(values, dtype=ty.np_dtype).tobytes()


def decode(data: bytes, ty: Type) -> list:
    if ty.is_extended:
        n = ty.size_bytes
        return [int.from_bytes(data[i:i + n], "little", signed=ty.is_signed) for i in range(0, len(data), n)]
    arr = np.frombuffer(data, dtype=ty.np_dtype)
    return [float(x) for x in arr] if ty.is_float else [int(x) for x in arr]


def lane_address(base: Register, size: int) -> list:
    """ADDR <- base + global_id * size."""
    return [isa.MOV(GID, Special.GLOBAL_ID, U64), isa.MOV_IMM(SCRATCH, size, U64),
            isa.MUL(SCRATCH, GID, SCRATCH, U64), isa.ADD(ADDR, base, SCRATCH, U64)]


def run_lanes(backend, body, in_types: list[Type], inputs: list[list], out_type: Type, *,
              out_reg: Register = Register(0), in_regs=None, optimize: bool = False,  # noqa: B008 - a frozen value
              shared_memory: int = 0):
    """Each lane i loads inputs[k][i] into in_regs[k] (default r1, r2, ...), runs `body` (a Label in it
    binds there), and stores
    out_reg (as out_type) to output element i. Returns the outputs as Python values."""
    n = len(inputs[0]) if inputs else 1
    in_regs = in_regs or [Register(k + 1) for k in range(len(inputs))]
    bases = [Register(255 - k) for k in range(len(inputs) + 1)]
    handles, params = [], {}
    for k, (ty, vals) in enumerate(zip(in_types, inputs)):
        h = backend.allocate_buffer(max(1, ty.size_bytes * n))
        backend.copy_to_buffer(h, encode(vals, ty))
        handles.append(h)
        params[bases[k + 1].index] = isa.pointer(h)
    out = backend.allocate_buffer(out_type.size_bytes * n)
    params[bases[0].index] = isa.pointer(out)
    b = isa.ProgramBuilder()
    for k, ty in enumerate(in_types):
        b.add(*lane_address(bases[k + 1], ty.size_bytes), isa.LDG(in_regs[k], Address.register(ADDR), ty))
    for item in body:  # a Label in the body binds there
        b.label(item) if isinstance(item, isa.Label) else b.add(item)
    b.add(*lane_address(bases[0], out_type.size_bytes), isa.STG(Address.register(ADDR), out_reg, out_type))
    program = b.build()
    if optimize:
        program = program.optimize()
    backend.execute_program_with_params(program, ExecutionParams(LaunchConfig.linear(n, shared_memory), params))
    data = bytearray(out_type.size_bytes * n)
    backend.copy_from_buffer(out, data)
    for h in handles + [out]:
        backend.free_buffer(h)
    return decode(bytes(data), out_type)


def ulp_of(x: float, ty: Type) -> float:
    """The spacing of ty's values at |x| (the gap just above x's binade start)."""
    mant = {Type.F16: 10, Type.BF16: 7, Type.F32: 23, Type.F64: 52}[ty]
    min_exp = {Type.F16: -14, Type.BF16: -126, Type.F32: -126, Type.F64: -1022}[ty]
    e = max(math.frexp(abs(x))[1] - 1, min_exp) if x else min_exp
    return 2.0 ** (e - mant)


def ulps(a: float, b: float, ty: Type) -> float:
    """Distance in units in the last place of ty (NaN == NaN; equal infinities are 0)."""
    if math.isnan(a) or math.isnan(b):
        return 0.0 if math.isnan(a) and math.isnan(b) else math.inf
    if a == b:
        return 0.0
    if math.isinf(a) or math.isinf(b):
        return math.inf
    mant = {Type.F16: 10, Type.BF16: 7, Type.F32: 23, Type.F64: 52}[ty]
    min_exp = {Type.F16: -14, Type.BF16: -126, Type.F32: -126, Type.F64: -1022}[ty]
    e = max(math.frexp(max(abs(a), abs(b)))[1] - 1, min_exp)
    return abs(a - b) / 2.0 ** (e - mant)


def ulps_array(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per element, how many values of the arrays' float type (float32 or float64) lie between got and want
    (0 where both are NaN or equal, a large number where only one is NaN or where an infinity meets a finite
    value): `ulps` for whole arrays."""
    bits, sign = (np.int32, 0x7FFFFFFF) if got.dtype == np.float32 else (np.int64, 0x7FFFFFFFFFFFFFFF)

    def ordered(a):
        i = np.ascontiguousarray(a).view(bits).astype(np.int64)
        return np.where(i < 0, -(i & sign), i)   # -0.0 and 0.0 both 0; monotone in the value
    o_g, o_w = ordered(got), ordered(want)
    u_g, u_w = o_g.view(np.uint64), o_w.view(np.uint64)   # the difference modulo 2**64: exact, it is below 2**64
    d = np.where(o_g > o_w, u_g - u_w, u_w - u_g).astype(np.float64)
    g_nan, w_nan = np.isnan(got), np.isnan(want)
    d = np.where(g_nan | w_nan, np.where(g_nan & w_nan, 0, 2.0 ** 60), d)
    return np.where(np.isinf(got) != np.isinf(want), 2.0 ** 60, d)


def same(got, want, ty: Type, max_ulps: float = 0) -> bool:
    if ty.is_integer:
        return got == want
    if max_ulps == 0:
        return (math.isnan(got) and math.isnan(want)) or (got == want and math.copysign(1, got) == math.copysign(1, want))
    return ulps(got, want, ty) <= max_ulps


def assert_values(got: list, want: list, ty: Type, max_ulps: float = 0, context=None) -> None:
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if not same(g, w, ty, max_ulps)]
    assert len(got) == len(want)
    assert not bad, f"{len(bad)} mismatches (index, got, want), first: {bad[:5]}; context: {context}"


def round_to(values, ty: Type) -> list:
    """Python values rounded (floats) or wrapped (ints) to ty, independent of eidos.isa.semantics."""
    if ty.is_float:
        with np.errstate(over="ignore"):
            arr = np.asarray(values, dtype=np.float64)
            if ty is Type.BF16:
                arr = arr.astype(np.float32)
            return [float(x) for x in arr.astype(ty.np_dtype)]
    mod = 1 << ty.bits
    out = []
    for v in values:
        v = int(v) % mod
        if ty.is_signed and v >= mod // 2:
            v -= mod
        out.append(v)
    return out
