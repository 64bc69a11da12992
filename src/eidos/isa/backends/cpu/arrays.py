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
from pathlib import Path

import numpy as np

from eidos.errors import BackendError

from ... import instructions as I
from ... import semantics as S
from ...address import CLASS_BYTES, Address, Register, Space
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
    """Exp by polynomials LLVM vectorizes (runtime.vexpf for F32, computed in float32: the operands are float32
    values, so the conversions are exact; runtime.vexp for F64), within 1 ULP, and F32 Sigmoid through vexpf
    (runtime.asigmoid32, within 2.5 ULP); the rest as NumPy does."""
    if op is M.Exp and ty is Type.F32:
        return "np.float64(vexpf(np.float32({x})))"
    if op is M.Exp and ty is Type.F64:
        return "vexp({x})"
    if op is M.Sigmoid and ty is Type.F32:
        return "asigmoid32({x})"
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


def _one_a_step(calls, n: int, ty, views):
    """run(scalars): each (kernel, op index, out, a, b) of a table of loops called in turn, a scalar operand
    broadcast to the n elements its loop reads."""
    def arr(x, sv):
        return np.full(n, sv[x[1]], dtype=ty.np_dtype) if _operand(x) else views[x]

    def run(sv):
        for k, op, out, a, b in calls:
            if b is None:
                k(n, op, out, arr(a, sv))
            else:
                k(n, op, out, arr(a, sv), arr(b, sv))
    return run


def _operand(x) -> bool:
    """A plan operand: an int is an array slot (x<k>), a tuple ("s", k) a scalar argument (s<k>)."""
    return isinstance(x, tuple)


def _step_lines(ty: Type, steps: list[tuple], store: bool, indent: str) -> tuple[list[str], set]:
    """Each step (dst, op, a, b) for element i, values kept local; store=False keeps results in registers
    only (their arrays are dead: a pool freed right after, see MapReduceStep)."""
    dt = f"np.{ty.np_dtype.name}"
    lines: list[str] = []
    local: set[int] = set()

    def val(x) -> str:
        if _operand(x):
            return f"s{x[1]}"
        if x in local:
            return f"v{x}"
        return f"np.float64(x{x}[i])" if ty.is_float else f"np.int64(x{x}[i])"

    for dst, op, a, b in steps:
        if ty.is_float:
            e = _unary_float(op, ty).format(x=val(a)) if b is None else _FLOAT_BINARY[op].format(a=val(a), b=val(b))
            lines += [f"r = {e}", f"v{dst} = np.float64({dt}(r))"]
        else:
            e = _int_unary(op, ty, val(a)) if b is None else _int_binary(op, ty, val(a), val(b))
            lines += [f"r = np.int64({e})", f"v{dst} = np.int64({dt}(r))"]
        local.add(dst)
    if store:
        # each destination once, its last value: distinct slots are disjoint ranges (the fusion condition),
        # so no later load of element i can see an earlier store, and the loop has no store-to-load chains
        lines += [f"x{d}[i] = {dt}(v{d})" for d in sorted(local)]
    return [indent + ln for ln in lines], local


_HEAD = ["import math", "import numpy as np", "from numba import njit, prange",
         "from eidos.isa.backends.cpu.runtime import *  # noqa: F403", ""]


def _narrow(ty: Type, nscalars: int) -> list[str]:
    """F32 scalar operands are float32 values passed as float64: saying so (an exact round trip) lets LLVM do
    the steps' F32 arithmetic in float32 (f64 then rounding equals f32 for + - * /), so the loop's vectors
    hold 16 float32 lanes rather than 8 float64 ones."""
    return [f"    s{k} = np.float64(np.float32(s{k}))" for k in range(nscalars)] if ty is Type.F32 else []


def map_source(ty: Type, steps: list[tuple], nslots: int, parallel: bool, nscalars: int = 0) -> str:
    """A numba kernel over slots x0.. and scalars s0..: each step (dst, op, a, b) in order for element i."""
    args = ", ".join([f"x{k}" for k in range(nslots)] + [f"s{k}" for k in range(nscalars)])
    body, _ = _step_lines(ty, steps, True, "        ")
    lines = _HEAD + [f"@njit(parallel={parallel}, **OPTS)", f"def kernel(n, {args}):", *_narrow(ty, nscalars),
                     f"    for i in {'prange' if parallel else 'range'}(n):"] + body
    return "\n".join(lines) + "\n"


REDUCE_CHUNKS = 16  # a parallel float Sum adds this many chunk sums in order: the same result on any thread count


def sum_source(ty: Type, steps: list[tuple], nslots: int, nscalars: int, src) -> str:
    """A float Sum of slot `src` after the steps (none: of the array itself), in binary64, in one pass:
    the steps' results stay in registers (not stored), each chunk's loop accumulates with a reassociable
    add (LLVM keeps one partial sum per vector lane), and the chunks' sums are added in order. kernel_seq
    is one chunk; kernel_par splits the elements into REDUCE_CHUNKS chunks over the threads (prange)."""
    arrays = [f"x{k}" for k in range(nslots)]
    scal = [f"s{k}" for k in range(nscalars)]
    body, local = _step_lines(ty, steps, False, "        ")
    v = f"v{src}" if src in local else f"np.float64(x{src}[i])"
    sliced = ", ".join([f"{a}[lo:hi]" for a in arrays] + scal)
    lines = _HEAD + ["@njit(**OPTS)", f"def kernel_seq(n, {', '.join(arrays + scal)}):", *_narrow(ty, nscalars),
                     "    acc = 0.0",
                     "    for i in range(n):"] + body + [f"        acc = radd(acc, {v})", "    return acc", "",
                     "@njit(parallel=True, **OPTS)", f"def kernel_par(n, {', '.join(arrays + scal)}):",
                     f"    parts = np.empty({REDUCE_CHUNKS})", f"    step = (n + {REDUCE_CHUNKS - 1}) // {REDUCE_CHUNKS}",
                     f"    for c in prange({REDUCE_CHUNKS}):", "        lo = min(n, c * step)",
                     "        hi = min(n, lo + step)", f"        parts[c] = kernel_seq(hi - lo, {sliced})",
                     "    acc = 0.0", f"    for c in range({REDUCE_CHUNKS}):", "        acc += parts[c]", "    return acc"]
    return "\n".join(lines) + "\n"


def table_ops(ty: Type, binary: bool) -> list:
    """The operations of ty's table of loops (table_source), in the order of their `op` numbers."""
    ops = [o for o in (B if binary else M) if ty.is_float or (o not in I.FLOAT_ONLY_MAPS and o not in I.FLOAT_ONLY_BINARY_MAPS)]
    if not ty.is_float:
        ops = [o for o in ops if o in ((B.Add, B.Sub, B.Mul, B.Div, B.Min, B.Max) if binary else (M.Abs, M.Neg, M.Relu))]
    return ops


def table_body(ty: Type, binary: bool, parallel: bool) -> list[str]:
    """The body of a table function over arrays d, a (and b) of n elements: one loop per operation, chosen by
    `op` outside the loop."""
    dt = f"np.{ty.np_dtype.name}"
    load = (lambda x: f"np.float64({x}[i])") if ty.is_float else (lambda x: f"np.int64({x}[i])")
    lines = []
    for k, op in enumerate(table_ops(ty, binary)):
        if ty.is_float:
            e = _FLOAT_BINARY[op].format(a=load("a"), b=load("b")) if binary else _unary_float(op, ty).format(x="x")
        else:
            e = _int_binary(op, ty, load("a"), load("b")) if binary else _int_unary(op, ty, "x")
        lines.append(f"    {'if' if k == 0 else 'elif'} op == {k}:")
        lines.append(f"        for i in {'prange' if parallel else 'range'}(n):")
        if not binary:
            lines.append(f"            x = {load('a')}")
        lines.append(f"            d[i] = {dt}({e})")
    return lines


def table_source(ty: Type, binary: bool, parallel: bool) -> str:
    """One numba function per (type, arity) holding a loop for every operation, chosen by `op` outside
    the loop: single-operation maps of any kind compile once per type, not once per operation."""
    args = "n, op, d, a, b" if binary else "n, op, d, a"
    lines = ["import math", "import numpy as np", "from numba import njit, prange",
             "from eidos.isa.backends.cpu.runtime import *  # noqa: F403", "",
             f"@njit(parallel={parallel}, **OPTS)", f"def kernel({args}):", *table_body(ty, binary, parallel)]
    return "\n".join(lines) + "\n", table_ops(ty, binary)


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


def _module(prefix: str, src: str, cache_dir):
    from .compile import GENERATOR_VERSION, load_module

    key = hashlib.blake2b(f"{GENERATOR_VERSION}\n{src}".encode(), digest_size=10).hexdigest()
    m = _KERNELS.get(key)
    if m is None:
        m = _KERNELS[key] = load_module(src, f"{prefix}_{key}", cache_dir)
    return m


def map_kernel(ty: Type, steps: list[tuple], nslots: int, parallel: bool, cache_dir, nscalars: int = 0):
    return _module("map", map_source(ty, steps, nslots, parallel, nscalars), cache_dir).kernel


def sum_kernel(ty: Type, steps: list[tuple], nslots: int, nscalars: int, src, parallel: bool, cache_dir):
    m = _module("sum", sum_source(ty, steps, nslots, nscalars, src), cache_dir)
    return m.kernel_par if parallel else m.kernel_seq


def native_table(ty: Type, binary: bool, backend):
    """ty's table compiled ahead of time (native.py), loaded without importing numba; None when not built yet
    (then the first process to compile the JIT table starts the build in the background) or numba is disabled."""
    if not backend._use_numba or ty in (Type.F16, Type.BF16) or ty.is_extended:
        return None
    from . import native

    where = Path(backend.cache_dir) / "native"
    found = native.load(ty, binary, where)
    if found is None and not _WARMING:
        _WARMING.append(native.warm_in_background(where))
    return found


_WARMING: list = []


def direct_map(operation, ty: Type, backend):
    """(fresh, op) to call as fresh(op, limit, a[, b]): the loop a one-instruction ParallelMap/ParallelMapBinary of
    `operation` runs here (the per-type table, one thread), over NumPy arrays into a new array of a's dtype and shape,
    for a caller holding arrays rather than buffers and a program (the tensor layer's small eager operations). It
    returns None, computing nothing, unless a (and b) are C-contiguous, aligned, writable ndarrays of ty in native
    byte order (`flags.carray`), of one shape, of at most `limit` elements. The table compiled ahead of time when
    built (no numba import: a fresh process's first operation costs well under a millisecond; the checks and the
    allocation in C), else numba's. None where no such loop exists (no numba, F16/BF16, an operation the type
    lacks)."""
    binary = isinstance(operation, I.BinaryMapOperation)
    aot = native_table(ty, binary, backend)
    if aot is not None:
        op = aot[1].get(operation)
        return None if op is None else (aot[2], op)
    if backend.numba is None or ty in (Type.F16, Type.BF16) or ty.is_extended:
        return None
    k, index = table_kernel(ty, binary, False, backend.cache_dir)
    op = index.get(operation)
    if op is None:
        return None
    # The compiled function for 1-d C-contiguous, aligned, writable arrays (what fresh checks), called without
    # numba's dispatch by argument types.
    z = np.zeros(1, ty.np_dtype)
    args = (0, op, z, z, z) if binary else (0, op, z, z)
    k(*args)
    compiled = k.overloads.get(tuple(k.typeof_pyval(x) for x in args))
    return _fresh(getattr(compiled, "entry_point", None) or k, ty.np_dtype, binary), op


def _fresh(kernel, dt, binary: bool):
    """fresh(op, limit, a[, b]) of the native modules (native._WRAPPER) in Python, over numba's kernel (written out:
    it is the small eager path where no C compiler built the modules)."""
    ndarray, empty = np.ndarray, np.empty

    def unary(op, limit, a):
        if (a.__class__ is not ndarray or not (a.dtype is dt or a.dtype == dt) or a.size > limit
                or not a.flags.carray):
            return None
        out = empty(a.shape, a.dtype)
        if a.ndim == 1:
            kernel(a.size, op, out, a)
        else:
            kernel(a.size, op, out.reshape(-1), a.reshape(-1))
        return out

    def binary_(op, limit, a, b):
        if (a.__class__ is not ndarray or b.__class__ is not ndarray or not (a.dtype is dt or a.dtype == dt)
                or not (b.dtype is dt or b.dtype == dt) or a.shape != b.shape or a.size > limit
                or not a.flags.carray or not b.flags.carray):
            return None
        out = empty(a.shape, a.dtype)
        if a.ndim == 1:
            kernel(a.size, op, out, a, b)
        else:
            kernel(a.size, op, out.reshape(-1), a.reshape(-1), b.reshape(-1))
        return out
    return binary_ if binary else unary


class Resolver:
    """addr -> the memory array it names, quickly, for re-checking that a binding still holds."""

    @staticmethod
    def memory_of(memory, addr):
        if addr.space is Space.BUFFER:
            return memory.buffers.get(addr.handle)
        if addr.space is Space.POOL:
            return memory.pools.get(addr.handle)
        return memory.class_memory


def map_steps(ins) -> list[tuple]:
    """(dst, operation, a, b) for each step of an element-wise collective."""
    if isinstance(ins, I.FusedMap):
        return [(s.dst, s.operation, s.a, s.b) for s in ins.steps]
    if isinstance(ins, I.ParallelMap):
        return [(ins.dst_array, ins.operation, ins.src_array, None)]
    return [(ins.dst_array, ins.operation, ins.src_a, ins.src_b)]


def scalar_values(regs: list, ty: Type, threads, registers) -> list:
    """The scalar operands' values in ty (floats as float, integers as their int64 bit pattern): from the
    threads' register rows (a program that sets them), else the launch's starting registers (else 0)."""
    w = S.wrapper(ty)
    out = []
    for r in regs:
        if threads:
            vals = set()
            for L in threads:
                row = L.R
                vals.add(float(row.RF[row.t, row.fslots[r.index]]) if ty.is_float
                         else int(row.RI[row.t, row.islots[r.index]]))
            if len(vals) != 1:
                raise BackendError(f"scalar operand {r} differs between threads ({len(vals)} values); "
                                   "a collective needs one value")
            v = vals.pop()
        else:
            v = (registers or {}).get(r.index, 0)
        v = w(float(v) if ty.is_float else int(v))
        if not ty.is_float and v >= 1 << 63:
            v -= 1 << 64
        out.append(v)
    return out


class MapStep:
    """A bound element-wise collective: views resolved once per set of live arrays, then reused.
    Scalar operands (Registers) are kernel arguments, read at each call."""

    def __init__(self, ins, index: int, backend) -> None:
        self.ins, self.index, self.backend = ins, index, backend
        self.steps = map_steps(ins)
        self.addresses = [a for st in self.steps for a in (st[2], st[3], st[0]) if isinstance(a, Address)]
        self.scalars = sorted({a for st in self.steps for a in (st[2], st[3]) if isinstance(a, Register)},
                              key=lambda r: r.index)
        self.ty, self.count = ins.ty, ins.count
        self.bound: list = []
        self.memory = None
        self.run = None
        self.views: list = []
        self.plan: list = []
        self.kernels: dict = {}
        self.how = ""

    def _resolve(self, memory):
        """The reference's checks, in its order; then (views, plan): each distinct range once, and the steps
        over slot numbers (scalars as ("s", k))."""
        A = ref.Arrays(memory, self.ins, self.index, ())
        ty, n = self.ty, self.count
        single = len(self.steps) == 1
        for j, (_dst, _op, a, b) in enumerate(self.steps):
            if isinstance(a, Address):
                A.read(a, ty, n, "src_a" if single and b is not None else ("src_array" if single else f"steps[{j}].a"))
            if isinstance(b, Address):
                A.read(b, ty, n, "src_b" if single else f"steps[{j}].b")
        for j, (dst, *_r) in enumerate(self.steps):
            A.output(dst, ty, n, "dst_array" if single else f"steps[{j}].dst")
        slots: dict[tuple, int] = {}
        views: list[np.ndarray] = []

        def slot(addr):
            if addr is None:
                return None
            if isinstance(addr, Register):
                return ("s", self.scalars.index(addr))
            mem, off = A._locate(addr)
            key = (id(mem), off)
            if key not in slots:
                slots[key] = len(views)
                views.append(mem[off:off + n * ty.size_bytes].view(ty.np_dtype))
            return slots[key]

        plan = [(slot(d), op, slot(a), slot(b)) for d, op, a, b in self.steps]
        self.bound = [(memory.buffers if a.space is Space.BUFFER else memory.pools, a.handle,
                       Resolver.memory_of(memory, a)) for a in self.addresses if a.space is not Space.CLASS]
        self.memory = memory
        return views, plan

    def _bind(self, memory) -> None:
        views, plan = self._resolve(memory)
        self.views, self.plan = views, plan
        ty, n = self.ty, self.count
        table = NUMPY_EXACT_FLOAT if ty.is_float else NUMPY_EXACT_INT
        has_scalars = bool(self.scalars)
        par = n >= PAR_MIN
        tables = (len(plan) == 1 and not has_scalars) or n < FUSE_MIN
        aot = {b is not None: native_table(ty, b is not None, self.backend) for _d, _op, _a, b in plan} \
            if tables and not par else {}
        if aot and all(t is not None and op in t[1] for (_d, op, _a, b) in plan for t in (aot[b is not None],)):
            # the tables compiled ahead of time (native.py): the same loops, and no numba import
            run = _one_a_step([(aot[b is not None][0], aot[b is not None][1][op], views[d], a, b)
                               for d, op, a, b in plan], n, ty, views)
            self.how = ("loop compiled ahead of time" if len(plan) == 1 else
                        f"{len(plan)} loops compiled ahead of time, one a step ({n} < {FUSE_MIN} elements)")
        elif self.backend.numba is not None and ty not in (Type.F16, Type.BF16):
            if tables:
                # the per-type tables of loops (compiled once per type for every operation), one call a step:
                # equal to the fused loop by the fusion condition, and no compile for a new chain
                calls = []
                for d, op, a, b in plan:
                    k, index = table_kernel(ty, b is not None, par, self.backend.cache_dir)
                    calls.append((k, index[op], views[d], a, b))
                run = _one_a_step(calls, n, ty, views)
                self.how = (f"numba loop{' in parallel (prange)' if par else ''}" if len(plan) == 1 else
                            f"{len(plan)} numba loops, one a step ({n} < {FUSE_MIN} elements: fusing would not pay "
                            "for its compile)")
            else:
                key = (tuple(plan), len(views), par)
                k = self.kernels.get(key)
                if k is None:  # (rebinding to new arrays keeps the kernel: no source or hash per call)
                    k = self.kernels[key] = map_kernel(ty, plan, len(views), par, self.backend.cache_dir,
                                                       len(self.scalars))
                args = (n, *views)

                def run(sv, k=k, args=args):
                    k(*args, *sv)
                self.how = (f"one fused numba loop over {len(plan)} step(s){' in parallel (prange)' if par else ''}"
                            + (f", {len(self.scalars)} scalar operand(s) as arguments" if has_scalars else ""))
        elif len(plan) == 1 and plan[0][1] in table and ty not in (Type.F16, Type.BF16):
            d, op, a, b = plan[0]
            f = table[op]

            def run(sv, f=f, out=views[d]):
                ins = [ty.np_dtype.type(sv[x[1]]) if _operand(x) else views[x] for x in (a, b) if x is not None]
                with np.errstate(all="ignore"):
                    f(*ins, out=out)
            self.how = f"NumPy ufunc {f.__name__} (exact in {ty.name})"
        else:  # NumPy in float64 rounded once: the reference formulas
            def run(sv, views=views, plan=plan):
                def arr(x):
                    return np.full(n, sv[x[1]], dtype=ty.np_dtype) if _operand(x) else views[x]
                for d, op, a, b in plan:
                    x = arr(a).copy()
                    views[d][...] = (ref.map_unary(op, x, ty) if b is None else ref.map_binary(op, x, arr(b), ty))
            self.how = "NumPy in float64, rounded once (the reference formula)"
        self.run = run

    def bound_to(self, memory) -> bool:
        if memory is not self.memory:
            return False
        for table, h, m in self.bound:
            if table.get(h) is not m:
                return False
        return True

    def __call__(self, memory, threads=(), registers=None) -> None:
        if not self.bound_to(memory):
            self._bind(memory)
        self.run(scalar_values(self.scalars, self.ty, threads, registers) if self.scalars else ())


def sum_fusable(ty: Type, backend) -> bool:
    return ty.is_float and ty not in (Type.F16, Type.BF16) and backend.numba is not None


class SumStep:
    """A float Sum (ParallelReduce Sum, ReduceAdd) as one numba pass in binary64, rounded once to ty: partial
    sums per vector lane and per chunk, so it may differ from the exactly rounded reference by the
    reassociation error docs/isa.md allows for reductions (2 n eps S). With `map_ins` (a map whose arrays a
    PoolFree right after makes dead) it also runs that map's steps in the same pass, storing nothing."""

    def __init__(self, ins, index: int, backend, map_ins=None, map_index: int | None = None) -> None:
        self.ins, self.index, self.backend = ins, index, backend
        self.map = MapStep(map_ins, map_index, backend) if map_ins is not None else None
        self.ty, self.count = ins.ty, ins.count
        self.memory = None
        self.run = None
        self.kernels: dict = {}
        self.how = ("one numba pass: the map's steps and the sum together, the map's results kept in registers "
                    "(its pool is freed right after); binary64 partial sums per vector lane and chunk"
                    if map_ins is not None else
                    "numba loop in binary64, partial sums per vector lane and chunk, rounded once")

    def _bind(self, memory) -> None:
        ty, n = self.ty, self.count
        A = ref.Arrays(memory, self.ins, self.index, ())
        if self.map is not None:
            views, plan = self.map._resolve(memory)
            mem, off = A._locate(self.ins.src_array)
            A.read(self.ins.src_array, ty, n, "src_array")
            src = next(d for d, _op, _a, _b in reversed(plan) if views[d].ctypes.data == mem.ctypes.data + off)
            nscal = len(self.map.scalars)
        else:
            views, plan, nscal = [A.read(self.ins.src_array, ty, n, "src_array")], [], 0
            src = 0
        key = (tuple(plan), len(views), src)
        k = self.kernels.get(key)
        if k is None:
            k = self.kernels[key] = sum_kernel(ty, plan, len(views), nscal, src, n >= PAR_MIN, self.backend.cache_dir)
        self.memory, self.views = memory, views
        self.bound = [(memory.buffers if a.space is Space.BUFFER else memory.pools, a.handle, Resolver.memory_of(memory, a))
                      for a in ([self.ins.src_array] + (self.map.addresses if self.map else []))
                      if a.space is not Space.CLASS]

        def run(sv, k=k, args=(n, *views)):
            return k(*args, *sv)
        self.run = run

    def __call__(self, memory, threads=(), registers=None) -> None:
        ok = memory is self.memory and all(table.get(h) is m for table, h, m in self.bound)
        if not ok:
            self._bind(memory)
        sv = scalar_values(self.map.scalars, self.ty, threads, registers) if self.map is not None and self.map.scalars else ()
        value = S.wrapper(self.ty)(float(self.run(sv)))
        for thread in threads:
            thread.R[self.ins.dst.index] = value


class Deferred:
    """A map whose work a following SumStep does (its arrays are dead): only the reference's address
    checks run here, so its errors are the same."""

    def __init__(self, ins, index: int, backend) -> None:
        self.step = MapStep(ins, index, backend)
        self.how = "runs inside the next instruction's pass (its results are only summed, then freed)"

    def __call__(self, memory, threads=(), registers=None) -> None:
        if not self.step.bound_to(memory):
            self.step._resolve(memory)


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
        if isinstance(ins, I.COMMUNICATING):
            self.how = "across the devices of the backend's group (the reference's call); unsupported in none"
        elif isinstance(ins, (I.PoolAlloc, I.PoolFree)):
            self.how = "allocation in the backend's Memory (as the reference)"
        elif self.fast is not None:
            self.how = f"BLAS through NumPy in {ins.ty.name}"
        else:
            self.how = "NumPy formula (the reference's), float64 rounded once"

    def __call__(self, memory, threads=(), registers=None) -> None:
        ins = self.ins
        if self.fast is not None:
            self.fast(ins, ref.Arrays(memory, ins, self.index, threads), memory)
        else:
            ref.run(ins, self.index, threads, memory)


def _float_sum(ins) -> bool:
    if isinstance(ins, I.ParallelReduce):
        return ins.operation is I.ReduceOperation.Sum and ins.ty.is_float
    return isinstance(ins, I.ReduceAdd) and ins.ty.is_float


def bind(ins, index: int, backend):
    """The callable that runs one collective instruction: step(memory, threads=(), registers=None)."""
    static = not any(a.space is Space.REGISTER for _, a in ins.addresses())
    if isinstance(ins, (I.ParallelMap, I.ParallelMapBinary, I.FusedMap)) and static:
        return MapStep(ins, index, backend)
    if _float_sum(ins) and static and sum_fusable(ins.ty, backend):
        return SumStep(ins, index, backend)
    return ArrayStep(ins, index, backend)


def fuse_sums(program, steps: dict, backend) -> None:
    """Map-then-sum in one pass: where a static element-wise map at i is followed by a float Sum at i + 1 of
    one of its destinations and a PoolFree at i + 2 of the pool holding every destination it writes (with
    no label between, so nothing else reaches them), the map's stores are dead: the Sum runs the map's
    steps itself and the map only checks its addresses. `steps` maps instruction index -> bound step."""
    ins = program.instructions
    marked = set(program.labels.values())
    for i in range(len(ins) - 2):
        m, r, f = ins[i], ins[i + 1], ins[i + 2]
        if not (isinstance(steps.get(i), MapStep) and isinstance(steps.get(i + 1), SumStep)
                and isinstance(f, I.PoolFree) and i + 1 not in marked and i + 2 not in marked):
            continue
        dsts = [st[0] for st in map_steps(m)]
        if (r.count != m.count or r.ty != m.ty or r.src_array not in dsts
                or any(d.space is not Space.POOL or d.handle != f.handle for d in dsts)):
            continue
        steps[i] = Deferred(m, i, backend)
        steps[i + 1] = SumStep(r, i + 1, backend, m, i)


__all__ = ["bind", "fuse_sums", "MapStep", "SumStep", "ArrayStep", "PAR_MIN", "CLASS_BYTES"]
