"""The collective (grid-wide) instructions, once per launch, as NumPy formulas.

Floats are computed in float64 and rounded once to the element type; integers wrap.
Outputs must be identical to or disjoint from each input range; where identical, every
input is read before any output is written.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from eidos.errors import BackendError, UnsupportedError

from ... import instructions as I
from ... import semantics as S
from ...address import CLASS_BYTES, POINTER_SHIFT, Register, Space
from ...types import Type

_LOW = (1 << POINTER_SHIFT) - 1


class Arrays:
    """Resolves addresses to NumPy views for one collective and checks their ranges."""

    def __init__(self, memory, ins, index: int, threads) -> None:
        self.memory, self.ins, self.threads = memory, ins, threads
        self.what = f"instruction {index} ({ins.name})"
        self.inputs: list[tuple[int, int, int, str]] = []

    def _locate(self, addr) -> tuple[np.ndarray, int]:
        if addr.space is Space.BUFFER:
            return self.memory.buffer(addr.handle, self.what), addr.offset
        if addr.space is Space.POOL:
            return self.memory.pool(addr.handle, self.what), addr.offset
        if addr.space is Space.CLASS:
            return self.memory.class_memory, addr.class_id * CLASS_BYTES + addr.offset
        if addr.space is Space.REGISTER:
            values = {L.R[addr.reg.index] for L in self.threads}
            if len(values) != 1:
                raise BackendError(f"{self.what}: address register {addr.reg} differs between threads "
                                   f"({len(values)} values); a collective needs one address")
            ptr = values.pop()
            if not isinstance(ptr, int) or ptr < 0:
                raise BackendError(f"{self.what}: {addr.reg} holds {ptr!r}, not a pointer")
            return self.memory.global_memory(ptr >> POINTER_SHIFT, self.what), ptr & _LOW
        raise BackendError(f"{self.what}: shared memory cannot be addressed by a collective")

    def _view(self, addr, ty: Type, count: int, name: str, skip: int = 0) -> tuple[np.ndarray, tuple]:
        mem, off = self._locate(addr)
        off += skip
        nbytes = count * ty.size_bytes
        if off < 0 or off + nbytes > mem.size:
            raise BackendError(f"{self.what}: {name} needs bytes {off}..{off + nbytes} but its memory has {mem.size}")
        return mem[off:off + nbytes].view(ty.np_dtype), (id(mem), off, nbytes, name)

    def read(self, addr, ty: Type, count: int, name: str) -> np.ndarray:
        arr, key = self._view(addr, ty, count, name)
        self.inputs.append(key)
        return arr

    def scalar(self, reg, ty: Type, name: str):
        """A scalar operand: R[reg], one value in every live thread, brought to ty (rounded or wrapped)."""
        values = {L.R[reg.index] for L in self.threads}
        if len(values) != 1:
            raise BackendError(f"{self.what}: scalar operand {name} ({reg}) differs between threads "
                               f"({len(values)} values); a collective needs one value")
        return S.wrapper(ty)(values.pop())

    def operand(self, x, ty: Type, count: int, name: str) -> np.ndarray:
        """A map operand: count elements at an address, or a scalar operand (a Register) repeated."""
        if isinstance(x, Register):
            return np.full(count, self.scalar(x, ty, name), dtype=ty.np_dtype)
        return self.read(x, ty, count, name)

    def output(self, addr, ty: Type, count: int, name: str, skip: int = 0) -> np.ndarray:
        """A writable view of count elements at addr (+ skip bytes), checked against the inputs read so far."""
        arr, (mem, off, nbytes, _) = self._view(addr, ty, count, name, skip)
        for m, o, n, other in self.inputs:
            if m == mem and o < off + nbytes and off < o + n and (o, n) != (off, nbytes):
                raise BackendError(f"{self.what}: output {name} partially overlaps input {other}; "
                                   "an output must be identical to or disjoint from each input")
        return arr

    def write(self, addr, ty: Type, values, name: str) -> None:
        values = np.asarray(values).reshape(-1)
        out = self.output(addr, ty, values.size, name)
        out[...] = to_type(values, ty)


def to_type(values: np.ndarray, ty: Type) -> np.ndarray:
    """Round float64 results once to ty (BF16 through float32, as the scalar rounding does)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if ty is Type.BF16:
            return np.asarray(values, dtype=np.float64).astype(np.float32).astype(ty.np_dtype)
        return np.asarray(values).astype(ty.np_dtype)


def f64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


# ---- element-wise maps -----------------------------------------------------------------------

def _relu(x):
    return np.where((x > 0) | np.isnan(x), x, 0.0) if x.dtype.kind == "f" else np.maximum(x, 0)


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


_MAPS = {I.MapOperation.Abs: np.abs, I.MapOperation.Neg: np.negative, I.MapOperation.Sqrt: np.sqrt,
         I.MapOperation.Exp: np.exp, I.MapOperation.Log: np.log, I.MapOperation.Sin: np.sin,
         I.MapOperation.Cos: np.cos, I.MapOperation.Tan: np.tan, I.MapOperation.Relu: _relu,
         I.MapOperation.Sigmoid: _sigmoid, I.MapOperation.Tanh: np.tanh}


def _fminmax(pick, a, b):
    r = pick(a, b)  # NaN-propagating
    eq = (a == b) & (a == 0)
    if eq.any():  # -0.0 is the smaller zero, as in the scalar MIN/MAX
        neg = np.signbit(a)
        r = np.where(eq, np.where(neg, a, b) if pick is np.minimum else np.where(neg, b, a), r)
    return r


def map_unary(op, x: np.ndarray, ty: Type) -> np.ndarray:
    with np.errstate(all="ignore"):
        return to_type(_MAPS[op](f64(x) if ty.is_float else x), ty)


def map_binary(op, a: np.ndarray, b: np.ndarray, ty: Type) -> np.ndarray:
    B = I.BinaryMapOperation
    with np.errstate(all="ignore"):
        if ty.is_float:
            a, b = f64(a), f64(b)
            f = {B.Add: np.add, B.Sub: np.subtract, B.Mul: np.multiply, B.Div: np.divide, B.Pow: np.power,
                 B.Atan2: np.arctan2, B.Min: lambda x, y: _fminmax(np.minimum, x, y),
                 B.Max: lambda x, y: _fminmax(np.maximum, x, y)}[op]
            return to_type(f(a, b), ty)
        if op is B.Div:  # truncating, x/0 = all ones: the scalar definition element by element
            div = S.binary("DIV", ty)
            return np.array([div(x, y) for x, y in zip(a.tolist(), b.tolist())], dtype=ty.np_dtype)
        f = {B.Add: np.add, B.Sub: np.subtract, B.Mul: np.multiply, B.Min: np.minimum, B.Max: np.maximum}[op]
        return f(a, b).astype(ty.np_dtype)


def reduce(op, x: np.ndarray, ty: Type):
    """A Python value of ty: Sum correctly rounded (floats) or wrapped (ints); others exact or in order."""
    R = I.ReduceOperation
    w = S.wrapper(ty)
    if ty.is_integer:
        vals = x.tolist()
        if op is R.Sum:
            return w(sum(vals))
        if op is R.Product:
            acc = 1
            for v in vals:
                acc = w(acc * v)
            return acc
        if not vals:
            return ty.max_value if op is R.Min else ty.min_value
        return min(vals) if op is R.Min else max(vals)
    v = f64(x)
    if op is R.Sum:
        if np.isfinite(v).all():
            return w(math.fsum(v.tolist()))
        with np.errstate(all="ignore"):
            return w(float(np.sum(v)))
    if op is R.Product:
        acc = 1.0
        for e in v.tolist():
            acc *= e
        return w(acc)
    if v.size == 0:
        return math.inf if op is R.Min else -math.inf
    if np.isnan(v).any():
        return math.nan
    return w(float(v.min() if op is R.Min else v.max()))


# ---- the collective instructions -----------------------------------------------------------

@functools.singledispatch
def run_one(ins, A: Arrays) -> None:
    """One registered function per collective instruction class."""
    raise BackendError(f"{A.what}: the reference backend cannot run {ins.name}")


def runs(*classes):
    def reg(fn):
        for c in classes:
            run_one.register(c, fn)
        return fn
    return reg


def _broadcast(threads, reg, value) -> None:
    for L in threads:
        L.R[reg.index] = value


@runs(I.ParallelMap)
def _(ins, A: Arrays):
    x = A.read(ins.src_array, ins.ty, ins.count, "src_array")
    A.output(ins.dst_array, ins.ty, ins.count, "dst_array")[...] = map_unary(ins.operation, x, ins.ty)


@runs(I.ParallelMapBinary)
def _(ins, A: Arrays):
    a = A.operand(ins.src_a, ins.ty, ins.count, "src_a")
    b = A.operand(ins.src_b, ins.ty, ins.count, "src_b")
    A.output(ins.dst_array, ins.ty, ins.count, "dst_array")[...] = map_binary(ins.operation, a, b, ins.ty)


@runs(I.FusedMap)
def _(ins, A: Arrays):
    # Check the fusion condition over all steps first, then run the steps in order (equal by that condition).
    for j, st in enumerate(ins.steps):
        for nm, a in (("a", st.a), ("b", st.b)):
            if a is not None:
                A.operand(a, ins.ty, 0 if isinstance(a, Register) else ins.count, f"steps[{j}].{nm}")
    for j, st in enumerate(ins.steps):
        A.output(st.dst, ins.ty, ins.count, f"steps[{j}].dst")
        A.read(st.dst, ins.ty, ins.count, f"steps[{j}].dst")  # later outputs are checked against it too
    A.inputs.clear()
    for st in ins.steps:
        a = A.operand(st.a, ins.ty, ins.count, "a").copy()
        if st.b is None:
            r = map_unary(st.operation, a, ins.ty)
        else:
            r = map_binary(st.operation, a, A.operand(st.b, ins.ty, ins.count, "b"), ins.ty)
        A.output(st.dst, ins.ty, ins.count, "dst")[...] = r
        A.inputs.clear()


@runs(I.ParallelReduce)
def _(ins, A: Arrays):
    _broadcast(A.threads, ins.dst, reduce(ins.operation, A.read(ins.src_array, ins.ty, ins.count, "src_array"), ins.ty))


_REDUCE_OF = {I.ReduceAdd: I.ReduceOperation.Sum, I.ReduceMul: I.ReduceOperation.Product,
              I.ReduceMin: I.ReduceOperation.Min, I.ReduceMax: I.ReduceOperation.Max}


@runs(*_REDUCE_OF)
def _(ins, A: Arrays):
    x = A.read(ins.src_array, ins.ty, ins.count, "src_array")
    _broadcast(A.threads, ins.dst, reduce(_REDUCE_OF[type(ins)], x, ins.ty))


@runs(I.PoolAlloc)
def _(ins, A: Arrays):
    A.memory.allocate_pool(ins.size, ins.handle)


@runs(I.PoolFree)
def _(ins, A: Arrays):
    A.memory.free_pool(ins.handle)


# ---- across devices: what a collective means over the ranks of a group -------------------------
# A group has ranks 0..N-1, one device each, and every rank runs the same program. An instruction's
# `devices` names the ranks taking part (all of them when empty), in ascending order; the others leave
# their memory alone. These functions are the definition (`values` holds each member's array, in rank
# order); a group (Memory.group, see eidos.isa.distributed) must give the same result, and the
# reference's own (distributed.Simulated) calls them.

def all_reduce(values: list, op, ty: Type) -> np.ndarray:
    """Element i combines the members' element i as ParallelReduce combines an array: integers wrap (Sum,
    Product) or compare exactly; float Sum is the exact sum rounded once to ty, Product multiplies in rank
    order in float64 and rounds once, Min/Max are exact with NaN winning and -0.0 below 0.0. With two
    ranks each of these is one IEEE operation in ty, so every engine's order gives it bit for bit."""
    R = I.ReduceOperation
    x = np.stack([np.asarray(v).reshape(-1) for v in values])
    if ty.is_integer:
        wide = x.astype(np.uint64 if ty.is_unsigned else np.int64)
        with np.errstate(over="ignore"):
            r = {R.Sum: lambda: wide.sum(0), R.Product: lambda: wide.prod(0),
                 R.Min: lambda: wide.min(0), R.Max: lambda: wide.max(0)}[op]()
        return r.astype(ty.np_dtype)
    v = f64(x)
    if op in (R.Min, R.Max):
        pick = np.minimum if op is R.Min else np.maximum
        return to_type(functools.reduce(lambda a, b: _fminmax(pick, a, b), v), ty)
    if op is R.Product or len(v) <= 2:
        with np.errstate(all="ignore"):
            return to_type(np.prod(v, 0) if op is R.Product else v.sum(0), ty)
    return np.array([reduce(R.Sum, v[:, i], ty) for i in range(v.shape[1])], dtype=ty.np_dtype)


def all_gather(values: list) -> np.ndarray:
    """The members' arrays one after another, in rank order."""
    return np.concatenate([np.asarray(v).reshape(-1) for v in values])


def members(devices, size: int, what: str = "a collective") -> tuple[int, ...]:
    """The ranks taking part: `devices` (ascending, distinct, each below size) or all of them."""
    if not devices:
        return tuple(range(size))
    devices = tuple(devices)
    if list(devices) != sorted(set(devices)) or devices[0] < 0 or devices[-1] >= size:
        raise BackendError(f"{what}: devices {devices} must be distinct ranks of the group (0..{size - 1}) "
                           "in ascending order")
    return devices


def across(ins, ops, group) -> None:
    """Run a collective instruction through `group` on the operands `ops` resolves (read and output as
    Arrays has them: the reference's and cpu's NumPy views, or triton's device tensors)."""
    if isinstance(ins, (I.AllReduce, I.Broadcast)):
        buf = ops.output(ins.buffer, ins.ty, ins.n, "buffer")
        if isinstance(ins, I.AllReduce):
            group.all_reduce(buf, ins.operation, ins.ty, ins.devices)
        else:
            group.broadcast(buf, ins.root, ins.ty, ins.devices)
        return
    many = ins.n * len(group.members(ins.devices))
    if isinstance(ins, I.AllGather):
        src = ops.read(ins.input, ins.ty, ins.n, "input")
        group.all_gather(ops.output(ins.output, ins.ty, many, "output"), src, ins.ty, ins.devices)
    else:
        src = ops.read(ins.input, ins.ty, many, "input")
        group.reduce_scatter(ops.output(ins.output, ins.ty, ins.n, "output"), src, ins.operation, ins.ty,
                             ins.devices)


@runs(*I.COMMUNICATING)
def _(ins, A: Arrays):
    group = getattr(A.memory, "group", None)
    if group is None:
        raise UnsupportedError(f"{ins.name} needs a multi-device backend; this backend has one device (it is in "
                               "no device group: eidos.isa.distributed)")
    across(ins, A, group)


# ---- extensions --------------------------------------------------------------------------------

def _rd(A, addr, ty, shape, name):
    return f64(A.read(addr, ty, int(np.prod(shape)), name)).reshape(shape)


@runs(I.GEMM)
def _(ins, A):
    a = _rd(A, ins.a, ins.ty, (ins.m, ins.k), "a")
    b = _rd(A, ins.b, ins.ty, (ins.k, ins.n), "b")
    r = ins.alpha * (a @ b)
    if ins.beta != 0:
        r = r + ins.beta * _rd(A, ins.c, ins.ty, (ins.m, ins.n), "c")
    A.write(ins.c, ins.ty, r, "c")


@runs(I.BatchedGEMM)
def _(ins, A):
    a = _rd(A, ins.a, ins.ty, (ins.batch, ins.m, ins.k), "a")
    b = _rd(A, ins.b, ins.ty, (ins.batch, ins.k, ins.n), "b")
    A.write(ins.c, ins.ty, a @ b, "c")


def conv2d(x, k, stride, padding):
    """NCHW input, OIHW kernel, zero padding: the reference formula, float64."""
    (sh, sw), (ph, pw) = stride, padding
    b, c, h, w = x.shape
    o, _, kh, kw = k.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho, wo = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    out = np.zeros((b, o, max(ho, 0), max(wo, 0)))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]
            out += np.einsum("bchw,oc->bohw", patch, k[:, :, i, j])
    return out


@runs(I.Conv2D)
def _(ins, A):
    x = _rd(A, ins.input, ins.ty, (ins.batch, ins.in_channels, ins.height, ins.width), "input")
    k = _rd(A, ins.kernel, ins.ty, (ins.out_channels, ins.in_channels, ins.kernel_h, ins.kernel_w), "kernel")
    A.write(ins.output, ins.ty, conv2d(x, k, ins.stride, ins.padding), "output")


def _normalize(x, axis, eps):
    """Two passes with a corrected mean: the mean of the residuals x - mean adds back what the first
    sum rounded away, so the mean is (all but always) the correctly rounded one whatever order the
    first sum took. Where the mean is large beside the spread (1e6 + N(0, 1)) one unit in its last
    place moves every deviation by far more than the float64 bound; this way every backend that
    corrects the same way agrees with this one however it orders its sums."""
    mean = x.mean(axis=axis, keepdims=True)
    mean = mean + (x - mean).mean(axis=axis, keepdims=True)
    d = x - mean
    return d / np.sqrt((d * d).mean(axis=axis, keepdims=True) + eps)


@runs(I.LayerNorm)
def _(ins, A):
    x = _rd(A, ins.input, ins.ty, (ins.rows, ins.n), "input")
    g = _rd(A, ins.gamma, ins.ty, (ins.n,), "gamma")
    b = _rd(A, ins.beta, ins.ty, (ins.n,), "beta")
    with np.errstate(all="ignore"):
        A.write(ins.output, ins.ty, _normalize(x, 1, ins.eps) * g + b, "output")


@runs(I.BatchNorm)
def _(ins, A):
    x = _rd(A, ins.input, ins.ty, (ins.batch, ins.channels, ins.spatial), "input")
    p = {n: _rd(A, getattr(ins, n), ins.ty, (ins.channels, 1), n) for n in ("gamma", "beta", "mean", "variance")}
    with np.errstate(all="ignore"):
        y = (x - p["mean"]) / np.sqrt(p["variance"] + ins.eps) * p["gamma"] + p["beta"]
    A.write(ins.output, ins.ty, y, "output")


@runs(I.GroupNorm)
def _(ins, A):
    x = _rd(A, ins.input, ins.ty, (ins.batch, ins.groups, ins.channels // ins.groups, ins.spatial), "input")
    g = _rd(A, ins.gamma, ins.ty, (ins.channels, 1), "gamma")
    b = _rd(A, ins.beta, ins.ty, (ins.channels, 1), "beta")
    with np.errstate(all="ignore"):
        y = _normalize(x, (2, 3), ins.eps).reshape(ins.batch, ins.channels, ins.spatial) * g + b
    A.write(ins.output, ins.ty, y, "output")


def softmax(x, axis=-1):
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


@runs(I.Softmax)
def _(ins, A):
    A.write(ins.output, ins.ty, softmax(_rd(A, ins.input, ins.ty, (ins.rows, ins.n), "input")), "output")


def attention(q, k, v):
    d = q.shape[-1]
    return softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(d)) @ v


@runs(I.Attention, I.FlashAttention)
def _(ins, A):
    shape = (ins.batch, ins.heads, ins.seq_len, ins.head_dim)
    q, k, v = (_rd(A, getattr(ins, n), ins.ty, shape, n) for n in ("query", "key", "value"))
    A.write(ins.output, ins.ty, attention(q, k, v), "output")


@runs(I.FFT)
def _(ins, A):
    z = _rd(A, ins.input, ins.ty, (ins.n, 2), "input")
    c = z[:, 0] + 1j * z[:, 1]
    r = np.fft.ifft(c) if ins.inverse else np.fft.fft(c)
    A.write(ins.output, ins.ty, np.stack([r.real, r.imag], axis=1), "output")


@runs(I.SparseGEMM)
def _(ins, A):
    ptr = A.read(ins.a_ptr, Type.I32, ins.m + 1, "a_ptr").astype(np.int64)
    nnz = int(ptr[-1]) if ins.m >= 0 else 0
    if ptr[0] != 0 or (np.diff(ptr) < 0).any() or nnz < 0:
        raise BackendError(f"{A.what}: a_ptr must start at 0 and never decrease")
    idx = A.read(ins.a_indices, Type.I32, nnz, "a_indices").astype(np.int64)
    if nnz and (idx.min() < 0 or idx.max() >= ins.k):
        raise BackendError(f"{A.what}: a_indices must lie in 0..{ins.k - 1}")
    vals = f64(A.read(ins.a_values, ins.ty, nnz, "a_values"))
    b = _rd(A, ins.b, ins.ty, (ins.k, ins.n), "b")
    c = np.zeros((ins.m, ins.n))
    for row in range(ins.m):
        s, e = ptr[row], ptr[row + 1]
        c[row] = vals[s:e] @ b[idx[s:e]]
    A.write(ins.c, ins.ty, c, "c")


@runs(I.TensorContract)
def _(ins, A):
    a = _rd(A, ins.a, ins.ty, tuple(ins.shape_a), "a")
    b = _rd(A, ins.b, ins.ty, tuple(ins.shape_b), "b")
    axes = ([p for p, _ in ins.contract_dims], [q for _, q in ins.contract_dims])
    try:
        r = np.tensordot(a, b, axes=axes)
    except (ValueError, IndexError) as e:
        raise BackendError(f"{A.what}: contract_dims {ins.contract_dims} do not fit shapes "
                           f"{ins.shape_a} and {ins.shape_b} ({e})") from None
    A.write(ins.output, ins.ty, r, "output")


@runs(I.QuantizedGEMM)
def _(ins, A):
    a = A.read(ins.a, Type.I8, ins.m * ins.k, "a").astype(np.int64).reshape(ins.m, ins.k)
    b = A.read(ins.b, Type.I8, ins.k * ins.n, "b").astype(np.int64).reshape(ins.k, ins.n)
    scale = float(ins.a_scale) * float(ins.b_scale) / float(ins.c_scale)
    q = np.clip(np.rint((a @ b).astype(np.float64) * scale), -128, 127)
    A.write(ins.c, Type.I8, q.astype(np.int8), "c")


@runs(I.MixedPrecisionGEMM)
def _(ins, A):
    a = _rd(A, ins.a, Type.F16, (ins.m, ins.k), "a")
    b = _rd(A, ins.b, Type.F16, (ins.k, ins.n), "b")
    A.write(ins.c, Type.F32, a @ b, "c")


@runs(I.LayerScale)
def _(ins, A):
    x = _rd(A, ins.input, ins.ty, (ins.n,), "input")
    A.write(ins.output, ins.ty, x * _rd(A, ins.scale, ins.ty, (ins.n,), "scale"), "output")


@runs(I.RoPE)
def _(ins, A):
    half = ins.head_dim // 2
    x = _rd(A, ins.input, ins.ty, (ins.batch, ins.seq_len, ins.heads, half, 2), "input")
    ang = _rd(A, ins.freqs, ins.ty, (ins.seq_len, half), "freqs")[None, :, None, :]
    cos, sin = np.cos(ang), np.sin(ang)
    out = np.empty_like(x)
    out[..., 0] = x[..., 0] * cos - x[..., 1] * sin
    out[..., 1] = x[..., 0] * sin + x[..., 1] * cos
    A.write(ins.output, ins.ty, out, "output")


@runs(I.KVCacheUpdate)
def _(ins, A):
    n = ins.batch * ins.heads * ins.head_dim
    new = A.read(ins.new_kv, ins.ty, n, "new_kv")
    A.output(ins.cache, ins.ty, n, "cache", skip=ins.position * n * ins.ty.size_bytes)[...] = new


def run(ins, index: int, threads, memory) -> None:
    """Execute one collective instruction once for the launch."""
    run_one(ins, Arrays(memory, ins, index, threads))
