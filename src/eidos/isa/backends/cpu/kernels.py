"""Vectorized kernels for the collective (array-level) instructions.

Element-wise maps (ParallelMap, ParallelMapBinary and the optimizer's FusedMap) run as one
numba loop over the elements (LLVM vectorizes it; prange splits it over the cores above
PAR_MIN elements), every step of a fused chain applied to element i while it is in a machine
register, each step's result rounded to the type and stored as the ISA says. Without numba,
single operations that NumPy computes exactly as docs/isa.md defines use the NumPy ufunc, the
rest the reference's float64 formulas. GEMM-like instructions use BLAS through NumPy in the element type; the
other extensions and the reductions use the reference backend's NumPy formulas, which are
the definitions. Address checks and their errors are the reference's (arrays.Arrays).
"""

from __future__ import annotations

import hashlib

import numpy as np

from eidos.errors import UnsupportedError

from ... import instructions as I
from ...address import CLASS_BYTES, Space
from ...types import Type
from ..reference import arrays as ref

PAR_MIN = 1 << 17  # elements; below this one thread wins (the pool's wake-up costs more)
FUSE_MIN = 256  # elements; shorter chains run step by step through the per-type tables (no new compile)
M, B = I.MapOperation, I.BinaryMapOperation

# NumPy ufuncs whose result, in the element type, is exactly the ISA's (correctly rounded or wrapped).
NUMPY_EXACT_FLOAT = {B.Add: np.add, B.Sub: np.subtract, B.Mul: np.multiply, B.Div: np.divide,
                     M.Sqrt: np.sqrt, M.Abs: np.abs, M.Neg: np.negative}
NUMPY_EXACT_INT = {B.Add: np.add, B.Sub: np.subtract, B.Mul: np.multiply, M.Abs: np.abs, M.Neg: np.negative}

# Float maps computed as NumPy computes them in float64 (hardware sqrt, libm functions, NaNs propagated).
_FLOAT_UNARY = {M.Abs: "abs({x})", M.Neg: "-{x}", M.Sqrt: "math.sqrt({x})", M.Exp: "math.exp({x})",
                M.Log: "alog({x})", M.Sin: "math.sin({x})", M.Cos: "math.cos({x})", M.Tan: "math.tan({x})",
                M.Relu: "({x} if ({x} > 0 or {x} != {x}) else 0.0)", M.Sigmoid: "asigmoid({x})",
                M.Tanh: "atanh_({x})"}
_FLOAT_BINARY = {B.Add: "{a} + {b}", B.Sub: "{a} - {b}", B.Mul: "{a} * {b}", B.Div: "{a} / {b}",
                 B.Pow: "apow({a}, {b})", B.Min: "amin({a}, {b})", B.Max: "amax({a}, {b})",
                 B.Atan2: "aatan2({a}, {b})"}


def _unary_float(op, ty: Type) -> str:
    """F32 Exp by a polynomial LLVM vectorizes (within 1 ULP after rounding); the rest as NumPy does."""
    if op is M.Exp and ty is Type.F32:
        return "vexp32({x})"
    return _FLOAT_UNARY[op]


def _int_unary(op, ty: Type, x: str) -> str:
    if op is M.Abs:
        return x if ty.is_unsigned else f"abs({x})"
    if op is M.Neg:
        return f"-{x}"
    if op is M.Relu:
        return x if ty.is_unsigned else f"max({x}, 0)"
    raise KeyError(op)


def _int_binary(op, ty: Type, a: str, b: str) -> str:
    u64 = ty is Type.U64
    if op in (B.Add, B.Sub, B.Mul):
        return f"{a} {'+-*'[[B.Add, B.Sub, B.Mul].index(op)]} {b}"
    if op is B.Div:
        return f"udiv64({a}, {b})" if u64 else f"sdiv({a}, {b})"
    if op in (B.Min, B.Max):
        lt = (f"ult64({a}, {b})" if u64 else f"{a} < {b}") if op is B.Min else (f"ult64({b}, {a})" if u64 else f"{b} < {a}")
        return f"({a} if {lt} else {b})"
    raise KeyError(op)


def map_source(ty: Type, steps: list[tuple], nslots: int, parallel: bool) -> str:
    """A numba kernel over slots x0..: each step (dst, op, a, b) in order for element i, values kept local."""
    dt = f"np.{ty.np_dtype.name}"
    lines = ["import math", "import numpy as np", "from numba import njit, prange",
             "from eidos.isa.backends.cpu.runtime import *  # noqa: F403", "",
             f"@njit(parallel={parallel}, **OPTS)",
             f"def kernel(n, {', '.join(f'x{k}' for k in range(nslots))}):",
             f"    for i in {'prange' if parallel else 'range'}(n):"]
    local: set[int] = set()

    def val(s: int) -> str:
        if s in local:
            return f"v{s}"
        return f"np.float64(x{s}[i])" if ty.is_float else f"np.int64(x{s}[i])"

    for dst, op, a, b in steps:
        if ty.is_float:
            e = _unary_float(op, ty).format(x=val(a)) if b is None else _FLOAT_BINARY[op].format(a=val(a), b=val(b))
            lines.append(f"        r = {e}")
            lines.append(f"        x{dst}[i] = {dt}(r)")
            lines.append(f"        v{dst} = np.float64(x{dst}[i])")
        else:
            e = _int_unary(op, ty, val(a)) if b is None else _int_binary(op, ty, val(a), val(b))
            lines.append(f"        r = np.int64({e})")
            lines.append(f"        x{dst}[i] = {dt}(r)")
            lines.append(f"        v{dst} = np.int64(x{dst}[i])")
        local.add(dst)
    return "\n".join(lines) + "\n"


def table_source(ty: Type, binary: bool, parallel: bool) -> str:
    """One numba function per (type, arity) holding a loop for every operation, chosen by `op` outside
    the loop: single-operation maps of any kind compile once per type, not once per operation."""
    dt = f"np.{ty.np_dtype.name}"
    ops = [o for o in (B if binary else M) if ty.is_float or (o not in I.FLOAT_ONLY_MAPS and o not in I.FLOAT_ONLY_BINARY_MAPS)]
    if not ty.is_float:
        ops = [o for o in ops if o in ((B.Add, B.Sub, B.Mul, B.Div, B.Min, B.Max) if binary else (M.Abs, M.Neg, M.Relu))]
    args = "n, op, d, a, b" if binary else "n, op, d, a"
    lines = ["import math", "import numpy as np", "from numba import njit, prange",
             "from eidos.isa.backends.cpu.runtime import *  # noqa: F403", "",
             f"@njit(parallel={parallel}, **OPTS)", f"def kernel({args}):"]
    load = (lambda x: f"np.float64({x}[i])") if ty.is_float else (lambda x: f"np.int64({x}[i])")
    for k, op in enumerate(ops):
        if ty.is_float:
            e = _FLOAT_BINARY[op].format(a=load("a"), b=load("b")) if binary else _unary_float(op, ty).format(x="x")
        else:
            e = _int_binary(op, ty, load("a"), load("b")) if binary else _int_unary(op, ty, "x")
        lines.append(f"    {'if' if k == 0 else 'elif'} op == {k}:")
        lines.append(f"        for i in {'prange' if parallel else 'range'}(n):")
        if not binary:
            lines.append(f"            x = {load('a')}")
        lines.append(f"            d[i] = {dt}({e})")
    return "\n".join(lines) + "\n", ops


_KERNELS: dict[str, object] = {}


def table_kernel(ty: Type, binary: bool, parallel: bool, cache_dir):
    from .compile import GENERATOR_VERSION, load_module

    key = f"{ty.name}_{'b' if binary else 'u'}_{'p' if parallel else 's'}"
    k = _KERNELS.get(key)
    if k is None:
        src, ops = table_source(ty, binary, parallel)
        name = hashlib.blake2b(f"{GENERATOR_VERSION}\n{src}".encode(), digest_size=10).hexdigest()
        k = _KERNELS[key] = (load_module(src, f"ops_{key}_{name}", cache_dir).kernel, {o: j for j, o in enumerate(ops)})
    return k


def map_kernel(ty: Type, steps: list[tuple], nslots: int, parallel: bool, cache_dir):
    from .compile import GENERATOR_VERSION, load_module

    src = map_source(ty, steps, nslots, parallel)
    key = hashlib.blake2b(f"{GENERATOR_VERSION}\n{src}".encode(), digest_size=10).hexdigest()
    k = _KERNELS.get(key)
    if k is None:
        k = _KERNELS[key] = load_module(src, f"map_{key}", cache_dir).kernel
    return k


class Resolver:
    """addr -> the memory array it names, quickly, for re-checking that a binding still holds."""

    @staticmethod
    def memory_of(memory, addr):
        if addr.space is Space.BUFFER:
            return memory.buffers.get(addr.handle)
        if addr.space is Space.POOL:
            return memory.pools.get(addr.handle)
        return memory.class_memory


class MapStep:
    """A bound element-wise collective: views resolved once per set of live arrays, then reused."""

    def __init__(self, ins, index: int, backend) -> None:
        self.ins, self.index, self.backend = ins, index, backend
        if isinstance(ins, I.FusedMap):
            self.steps = [(s.dst, s.operation, s.a, s.b) for s in ins.steps]
        elif isinstance(ins, I.ParallelMap):
            self.steps = [(ins.dst_array, ins.operation, ins.src_array, None)]
        else:
            self.steps = [(ins.dst_array, ins.operation, ins.src_a, ins.src_b)]
        self.addresses = [a for st in self.steps for a in (st[2], st[3], st[0]) if a is not None]
        self.ty, self.count = ins.ty, ins.count
        self.bound: list = []
        self.memory = None
        self.run = None
        self.how = ""

    def _bind(self, memory) -> None:
        A = ref.Arrays(memory, self.ins, self.index, ())
        ty, n = self.ty, self.count
        for j, (_dst, _op, a, b) in enumerate(self.steps):  # the reference's checks, in its order
            A.read(a, ty, n, "src_a" if len(self.steps) == 1 and b is not None else
                   ("src_array" if len(self.steps) == 1 else f"steps[{j}].a"))
            if b is not None:
                A.read(b, ty, n, "src_b" if len(self.steps) == 1 else f"steps[{j}].b")
        for j, (dst, *_r) in enumerate(self.steps):
            A.output(dst, ty, n, "dst_array" if len(self.steps) == 1 else f"steps[{j}].dst")
        slots: dict[tuple, int] = {}
        views: list[np.ndarray] = []

        def slot(addr) -> int:
            mem, off = A._locate(addr)
            key = (id(mem), off)
            if key not in slots:
                slots[key] = len(views)
                views.append(mem[off:off + n * ty.size_bytes].view(ty.np_dtype))
            return slots[key]

        plan = [(slot(d), op, slot(a), None if b is None else slot(b)) for d, op, a, b in self.steps]
        table = NUMPY_EXACT_FLOAT if ty.is_float else NUMPY_EXACT_INT
        if self.backend.numba is not None and ty not in (Type.F16, Type.BF16):
            par = n >= PAR_MIN
            if len(plan) == 1 or n < FUSE_MIN:
                # the per-type tables of loops (compiled once per type for every operation), one call a step:
                # equal to the fused loop by the fusion condition, and no compile for a new chain
                calls = []
                for d, op, a, b in plan:
                    k, index = table_kernel(ty, b is not None, par, self.backend.cache_dir)
                    calls.append((k, (n, index[op], views[d], views[a]) + (() if b is None else (views[b],))))
                if len(calls) == 1:
                    k, args = calls[0]

                    def run(k=k, args=args):
                        k(*args)
                else:
                    def run(calls=calls):
                        for k, args in calls:
                            k(*args)
                self.how = (f"numba loop{' in parallel (prange)' if par else ''}" if len(plan) == 1 else
                            f"{len(plan)} numba loops, one a step ({n} < {FUSE_MIN} elements: fusing would not pay "
                            "for its compile)")
            else:
                k = map_kernel(ty, plan, len(views), par, self.backend.cache_dir)
                args = (n, *views)

                def run(k=k, args=args):
                    k(*args)
                self.how = f"one fused numba loop over {len(plan)} steps{' in parallel (prange)' if par else ''}"
        elif len(plan) == 1 and plan[0][1] in table and ty not in (Type.F16, Type.BF16):
            d, op, a, b = plan[0]
            f = table[op]
            ins = (views[a],) if b is None else (views[a], views[b])

            def run(f=f, ins=ins, out=views[d]):
                with np.errstate(all="ignore"):
                    f(*ins, out=out)
            self.how = f"NumPy ufunc {f.__name__} (exact in {ty.name})"
        else:  # NumPy in float64 rounded once: the reference formulas
            def run(views=views, plan=plan):
                for d, op, a, b in plan:
                    x = views[a].copy()
                    views[d][...] = (ref.map_unary(op, x, ty) if b is None else ref.map_binary(op, x, views[b], ty))
            self.how = "NumPy in float64, rounded once (the reference formula)"
        # what must still hold for this binding: each (table, handle) still maps to the same array
        self.bound = [(memory.buffers if a.space is Space.BUFFER else memory.pools, a.handle,
                       Resolver.memory_of(memory, a)) for a in self.addresses if a.space is not Space.CLASS]
        self.memory = memory
        self.run = run

    def __call__(self, memory, lanes=()) -> None:
        if memory is not self.memory:
            self._bind(memory)
        else:
            for table, h, m in self.bound:
                if table.get(h) is not m:
                    self._bind(memory)
                    break
        self.run()


def _gemm(ins, A, memory) -> None:
    ty = ins.ty
    a = A.read(ins.a, ty, ins.m * ins.k, "a").reshape(ins.m, ins.k)
    b = A.read(ins.b, ty, ins.k * ins.n, "b").reshape(ins.k, ins.n)
    c_old = A.read(ins.c, ty, ins.m * ins.n, "c").reshape(ins.m, ins.n) if ins.beta != 0 else None
    out = A.output(ins.c, ty, ins.m * ins.n, "c").reshape(ins.m, ins.n)
    if ins.alpha == 1 and c_old is None:
        np.matmul(a, b, out=out)
        return
    r = np.matmul(a, b)
    if ins.alpha != 1:
        r *= ty.np_dtype.type(ins.alpha)
    if c_old is not None:
        r += ty.np_dtype.type(ins.beta) * c_old
    out[...] = r


def _batched(ins, A, memory) -> None:
    ty = ins.ty
    a = A.read(ins.a, ty, ins.batch * ins.m * ins.k, "a").reshape(ins.batch, ins.m, ins.k)
    b = A.read(ins.b, ty, ins.batch * ins.k * ins.n, "b").reshape(ins.batch, ins.k, ins.n)
    out = A.output(ins.c, ty, ins.batch * ins.m * ins.n, "c").reshape(ins.batch, ins.m, ins.n)
    np.matmul(a, b, out=out)


BLAS = {I.GEMM: _gemm, I.BatchedGEMM: _batched}


class ArrayStep:
    """Any other collective: BLAS in the element type where it applies, else the reference formula."""

    def __init__(self, ins, index: int, backend) -> None:
        self.ins, self.index = ins, index
        fast = BLAS.get(type(ins))
        self.fast = fast if fast is not None and getattr(ins, "ty", None) in (Type.F32, Type.F64) else None
        if isinstance(ins, (I.AllReduce, I.AllGather)):
            self.how = "unsupported: one device"
        elif self.fast is not None:
            self.how = f"BLAS through NumPy in {ins.ty.name}"
        else:
            self.how = "NumPy formula (the reference's), float64 rounded once"

    def __call__(self, memory, lanes=()) -> None:
        ins = self.ins
        if isinstance(ins, (I.AllReduce, I.AllGather)):
            raise UnsupportedError(f"{ins.name} needs a multi-device backend; the cpu backend has one device")
        if self.fast is not None:
            self.fast(ins, ref.Arrays(memory, ins, self.index, lanes), memory)
        else:
            ref.run(ins, self.index, lanes, memory)


def bind(ins, index: int, backend):
    """The callable that runs one collective instruction: step(memory, lanes)."""
    elementwise = isinstance(ins, (I.ParallelMap, I.ParallelMapBinary, I.FusedMap))
    if elementwise and not any(a.space is Space.REGISTER for _, a in ins.addresses()):
        return MapStep(ins, index, backend)
    return ArrayStep(ins, index, backend)


__all__ = ["bind", "MapStep", "ArrayStep", "PAR_MIN", "CLASS_BYTES"]
