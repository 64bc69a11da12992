"""The Atlas ISA's array-level extensions on the GPU: one function per instruction class.

Each reads its operands as typed tensors of the backend's DeviceMemory in the reference's order
(so the same bad operand raises the same BackendError), checks that outputs are identical to or
disjoint from inputs, and launches a kernel from kernels/. Instructions with a Triton kernel:
GEMM, BatchedGEMM, MixedPrecisionGEMM, QuantizedGEMM, TensorContract (permuted into one GEMM),
SparseGEMM, Softmax, LayerNorm, GroupNorm, BatchNorm, Attention, FlashAttention, RoPE, LayerScale.
Through a vendor library (torch): Conv2D (cuDNN), FFT (cuFFT), KVCacheUpdate (a device copy).
AllReduce, AllGather, Broadcast and ReduceScatter call the device group the backend joined (Memory.group:
NCCL through torch.distributed), and raise UnsupportedError in none. The per-thread extensions (FMS, RCP,
RSQRT, CLAMP, LERP, SIGN, FLOOR, CEIL, ROUND, TRUNC, GELU, SWISH) are register instructions and
run in compile.py's thread kernels. docs/isa-triton.md says why each route was chosen.
"""

from __future__ import annotations

import functools
import math

from eidos.errors import BackendError, UnsupportedError

from ... import instructions as I
from ...address import Space
from ...types import Type

KERNEL = "triton"
VENDOR = "torch"

# instruction class -> (route, what runs): the coverage table explain() and the docs read
ROUTES: dict[type, tuple[str, str]] = {
    I.GEMM: (KERNEL, "gemm.gemm_kernel: tiled tl.dot, alpha/beta epilogue (gemm_tma_kernel, TMA tiles, for "
                     "aligned F16/BF16 without beta on Hopper)"),
    I.BatchedGEMM: (KERNEL, "gemm.gemm_kernel: tiled tl.dot, one grid row per batch"),
    I.MixedPrecisionGEMM: (KERNEL, "gemm.gemm_kernel: F16 tl.dot accumulated and stored in F32"),
    I.QuantizedGEMM: (KERNEL, "gemm.quantized_kernel: int8 tl.dot, exact int64 sum, float64 scale"),
    I.TensorContract: (KERNEL, "gemm.gemm_kernel on the operands permuted to (free, contracted)"),
    I.SparseGEMM: (KERNEL, "sparse.csr_kernel: one program per row and column block"),
    I.Softmax: (KERNEL, "softmax.softmax_kernel: one program per row"),
    I.LayerNorm: (KERNEL, "norms.norm_kernel: one program per row"),
    I.GroupNorm: (KERNEL, "norms.norm_kernel: one program per (batch, group)"),
    I.BatchNorm: (KERNEL, "norms.batch_norm_kernel: element-wise"),
    I.Attention: (KERNEL, "attention._attention: fused flash attention (online softmax; TMA tiles for "
                          "F16/BF16 on Hopper; flash_hopper._flash_ws, warp-specialized, for heads of 64 and 128)"),
    I.FlashAttention: (KERNEL, "attention._attention: fused flash attention (online softmax; TMA tiles for "
                               "F16/BF16 on Hopper; flash_hopper._flash_ws, warp-specialized, for heads of 64 and 128)"),
    I.RoPE: (KERNEL, "elementwise.rope_kernel: float64 angles"),
    I.LayerScale: (KERNEL, "elementwise.scale_kernel"),
    I.Conv2D: (VENDOR, "torch.nn.functional.conv2d (cuDNN; TF32 off; F16/BF16 computed in F32)"),
    I.FFT: (VENDOR, "torch.fft (cuFFT; F16/BF16 computed in F32)"),
    I.KVCacheUpdate: (VENDOR, "a device copy (Tensor.copy_)"),
}
EXTENSIONS = tuple(ROUTES)
ACROSS = "needs a multi-device backend; the triton backend has one device (it is in no device group)"


class Operands:
    """Typed tensors for one instruction's operands, with the reference's checks and messages.

    An output identical to an input is written in place where the kernel allows it (`in_place`:
    True for any input, or the names of the inputs it may alias), else through a scratch tensor
    copied back by finish(); so is an output at an offset that is not a multiple of its element
    size (no typed view exists there; such inputs are read through an aligned copy)."""

    def __init__(self, memory, ins, index: int, pointers=None) -> None:
        self.memory, self.ins, self.pointers = memory, ins, pointers or {}
        self.what = f"instruction {index} ({ins.name})"
        self.inputs: list[tuple[int, int, str]] = []  # (first byte address, bytes, name)
        self.pending: list[tuple] = []  # (scratch, destination bytes)

    def _locate(self, addr):
        if addr.space is Space.REGISTER:
            if addr.reg.index not in self.pointers:
                raise BackendError(f"{self.what}: address register {addr.reg} has no pointer value; the backend "
                                   "passes the threads' common value in `pointers`")
            return self.memory.locate_pointer(self.pointers[addr.reg.index], self.what)
        return self.memory.locate(addr, self.what)

    def _bytes(self, addr, ty: Type, count: int, name: str, skip: int = 0):
        """(uint8 memory, byte offset, bytes, typed view or None where misaligned), bounds checked."""
        mem, off = self._locate(addr)
        off += skip
        size = ty.size_bytes
        aligned = off >= 0 and (mem.storage_offset() + off) % size == 0
        if aligned:
            return mem, off, count * size, self.memory.typed(mem, off, ty, count, what=self.what, name=name)
        self.memory.typed(mem, off, Type.U8, count * size, what=self.what, name=name)  # the bounds message
        return mem, off, count * size, None

    def read(self, addr, ty: Type, count: int, name: str):
        mem, off, nbytes, view = self._bytes(addr, ty, count, name)
        self.inputs.append((mem.data_ptr() + off, nbytes, name))
        if view is None:  # an aligned copy of the bytes
            from .device_memory import torch_dtype

            view = mem[off:off + nbytes].clone().view(torch_dtype(ty))
        return view

    def output(self, addr, ty: Type, count: int, name: str, *, skip: int = 0,
               in_place: bool | tuple[str, ...] = False):
        mem, off, nbytes, view = self._bytes(addr, ty, count, name, skip)
        start = mem.data_ptr() + off
        scratch_needed = view is None
        for o, n, other in self.inputs:
            if o < start + nbytes and start < o + n:
                if (o, n) != (start, nbytes):
                    raise BackendError(f"{self.what}: output {name} partially overlaps input {other}; "
                                       "an output must be identical to or disjoint from each input")
                if in_place is not True and other not in (in_place or ()):
                    scratch_needed = True
        if scratch_needed:
            from .device_memory import torch_dtype

            scratch = self.memory.torch.empty(count, dtype=torch_dtype(ty), device=mem.device)
            self.pending.append((scratch, mem[off:off + nbytes]))
            return scratch
        return view

    def finish(self) -> None:
        for scratch, dst in self.pending:
            dst.copy_(scratch.view(-1).view(dst.dtype))
        self.pending.clear()


@functools.singledispatch
def _run(ins, ops: Operands) -> None:
    raise UnsupportedError(f"{ins.name}: the triton backend has no array-level form of this instruction")


def _runs(*classes):
    def reg(fn):
        for c in classes:
            _run.register(c, fn)
        return fn
    return reg


@_runs(*I.COMMUNICATING)
def _(ins, ops: Operands):
    if ops.memory.group is None:
        raise UnsupportedError(f"{ins.name} {ACROSS}")
    from ..reference.arrays import across

    across(ins, ops, ops.memory.group)


def run(ins, memory, *, index: int = 0, pointers=None) -> None:
    """Run one extension instruction once for the launch on memory's device.

    `pointers` maps the index of each register an address is read from to the pointer value every
    thread holds (the backend checks they agree); `index` is the instruction's place in its program,
    for messages."""
    ops = Operands(memory, ins, index, pointers)
    _run(ins, ops)
    ops.finish()


def source(ins) -> str:
    """How ins runs, and the Triton source of its kernel where it has one (for explain)."""
    cls = type(ins)
    if cls in I.COMMUNICATING:
        return f"{ins.name}: the device group's call (NCCL through torch.distributed); unsupported in no group"
    if cls not in ROUTES:
        return f"{ins.name}: unsupported (no array-level form; a register instruction runs in threads)"
    route, what = ROUTES[cls]
    head = f"{ins.name}: {'Triton kernel' if route == KERNEL else 'vendor library through torch'}: {what}"
    if route != KERNEL:
        return head
    import importlib
    import inspect

    module, name = what.split(":")[0].split(".")
    fn = getattr(importlib.import_module(f"{__package__}.kernels.{module}"), name)
    while not hasattr(fn, "src") and hasattr(fn, "fn"):  # autotuner, heuristics, interpreter wrappers
        fn = fn.fn
    return f"{head}\n{getattr(fn, 'src', None) or inspect.getsource(fn)}"


# ---- matrix products -------------------------------------------------------------------------

def _mm():
    from .kernels import gemm
    return gemm


@_runs(I.GEMM)
def _(ins, ops: Operands) -> None:
    m, n, k, ty = ins.m, ins.n, ins.k, ins.ty
    a = ops.read(ins.a, ty, m * k, "a").view(m, k)
    b = ops.read(ins.b, ty, k * n, "b").view(k, n)
    c = ops.read(ins.c, ty, m * n, "c").view(m, n) if ins.beta != 0 else None
    out = ops.output(ins.c, ty, m * n, "c", in_place=("c",)).view(m, n)  # each tile reads its c first
    _mm().matmul(a, b, out, alpha=ins.alpha, beta=ins.beta, c=c)


@_runs(I.BatchedGEMM)
def _(ins, ops: Operands) -> None:
    nb, m, n, k, ty = ins.batch, ins.m, ins.n, ins.k, ins.ty
    a = ops.read(ins.a, ty, nb * m * k, "a").view(nb, m, k)
    b = ops.read(ins.b, ty, nb * k * n, "b").view(nb, k, n)
    _mm().matmul(a, b, ops.output(ins.c, ty, nb * m * n, "c").view(nb, m, n))


@_runs(I.MixedPrecisionGEMM)
def _(ins, ops: Operands) -> None:
    m, n, k = ins.m, ins.n, ins.k
    a = ops.read(ins.a, Type.F16, m * k, "a").view(m, k)
    b = ops.read(ins.b, Type.F16, k * n, "b").view(k, n)
    _mm().matmul(a, b, ops.output(ins.c, Type.F32, m * n, "c").view(m, n))


@_runs(I.QuantizedGEMM)
def _(ins, ops: Operands) -> None:
    m, n, k = ins.m, ins.n, ins.k
    a = ops.read(ins.a, Type.I8, m * k, "a").view(m, k)
    b = ops.read(ins.b, Type.I8, k * n, "b").view(k, n)
    if float(ins.c_scale) == 0:
        raise BackendError(f"{ops.what}: c_scale is 0; the output scale must be nonzero")
    scale = float(ins.a_scale) * float(ins.b_scale) / float(ins.c_scale)  # the reference's order
    _mm().quantized(a, b, ops.output(ins.c, Type.I8, m * n, "c").view(m, n), scale)


def _contraction(ins, what: str) -> tuple[list[int], list[int], list[int], list[int]]:
    """(free axes of a, contracted axes of a, contracted axes of b, free axes of b), checked."""
    sa, sb, pairs = tuple(ins.shape_a), tuple(ins.shape_b), tuple(ins.contract_dims)

    def bad(why: str) -> BackendError:
        return BackendError(f"{what}: contract_dims {ins.contract_dims} do not fit shapes {sa} and {sb} ({why})")

    ca, cb = [], []
    for p, q in pairs:
        if not (-len(sa) <= p < len(sa)) or not (-len(sb) <= q < len(sb)):
            raise bad(f"axis pair ({p}, {q}) is out of range for {len(sa)} and {len(sb)} dimensions")
        p, q = p % len(sa), q % len(sb)
        if sa[p] != sb[q]:
            raise bad(f"axis {p} of a has length {sa[p]}, axis {q} of b has {sb[q]}")
        ca.append(p)
        cb.append(q)
    if len(set(ca)) != len(ca) or len(set(cb)) != len(cb):
        raise bad("an axis is contracted twice")
    return [i for i in range(len(sa)) if i not in ca], ca, cb, [j for j in range(len(sb)) if j not in cb]


@_runs(I.TensorContract)
def _(ins, ops: Operands) -> None:
    ty, sa, sb = ins.ty, tuple(ins.shape_a), tuple(ins.shape_b)
    a = ops.read(ins.a, ty, math.prod(sa), "a").view(sa)
    b = ops.read(ins.b, ty, math.prod(sb), "b").view(sb)
    fa, ca, cb, fb = _contraction(ins, ops.what)
    m, k, n = math.prod(sa[i] for i in fa), math.prod(sa[i] for i in ca), math.prod(sb[j] for j in fb)
    a2 = a.permute(*fa, *ca).reshape(m, k)  # copies only where the permutation needs it
    b2 = b.permute(*cb, *fb).reshape(k, n)
    _mm().matmul(a2, b2, ops.output(ins.output, ty, m * n, "output").view(m, n))


@_runs(I.SparseGEMM)
def _(ins, ops: Operands) -> None:
    from .kernels import sparse

    m, n, k, ty = ins.m, ins.n, ins.k, ins.ty
    ptr = ops.read(ins.a_ptr, Type.I32, m + 1, "a_ptr")
    nnz = int(ptr[-1])  # one device-to-host read: the sizes below depend on it
    if int(ptr[0]) != 0 or nnz < 0 or (m > 0 and bool((ptr[1:] < ptr[:-1]).any())):
        raise BackendError(f"{ops.what}: a_ptr must start at 0 and never decrease")
    idx = ops.read(ins.a_indices, Type.I32, nnz, "a_indices")
    if nnz and bool(((idx < 0) | (idx >= k)).any()):
        raise BackendError(f"{ops.what}: a_indices must lie in 0..{k - 1}")
    vals = ops.read(ins.a_values, ty, nnz, "a_values")
    b = ops.read(ins.b, ty, k * n, "b")
    sparse.csr_matmul(ptr, idx, vals, b, ops.output(ins.c, ty, m * n, "c"), m, n)


# ---- rows: softmax and norms -----------------------------------------------------------------

@_runs(I.Softmax)
def _(ins, ops: Operands) -> None:
    from .kernels import softmax

    count = ins.rows * ins.n
    x = ops.read(ins.input, ins.ty, count, "input")
    softmax.softmax(x, ops.output(ins.output, ins.ty, count, "output", in_place=True), ins.rows, ins.n)


@_runs(I.LayerNorm)
def _(ins, ops: Operands) -> None:
    from .kernels import norms

    count = ins.rows * ins.n
    x = ops.read(ins.input, ins.ty, count, "input")
    g = ops.read(ins.gamma, ins.ty, ins.n, "gamma")
    b = ops.read(ins.beta, ins.ty, ins.n, "beta")
    out = ops.output(ins.output, ins.ty, count, "output", in_place=True)
    norms.layer_norm(x, g, b, out, ins.rows, ins.n, ins.eps)


@_runs(I.BatchNorm)
def _(ins, ops: Operands) -> None:
    from .kernels import norms

    count = ins.batch * ins.channels * ins.spatial
    x = ops.read(ins.input, ins.ty, count, "input")
    p = [ops.read(getattr(ins, nm), ins.ty, ins.channels, nm) for nm in ("gamma", "beta", "mean", "variance")]
    out = ops.output(ins.output, ins.ty, count, "output", in_place=True)
    norms.batch_norm(x, *p, out, ins.batch, ins.channels, ins.spatial, ins.eps)


@_runs(I.GroupNorm)
def _(ins, ops: Operands) -> None:
    from .kernels import norms

    if ins.groups <= 0 or ins.channels % ins.groups:
        raise BackendError(f"{ops.what}: channels ({ins.channels}) must be a positive multiple of groups ({ins.groups})")
    count = ins.batch * ins.channels * ins.spatial
    x = ops.read(ins.input, ins.ty, count, "input")
    g = ops.read(ins.gamma, ins.ty, ins.channels, "gamma")
    b = ops.read(ins.beta, ins.ty, ins.channels, "beta")
    out = ops.output(ins.output, ins.ty, count, "output", in_place=True)
    norms.group_norm(x, g, b, out, ins.batch, ins.channels, ins.groups, ins.spatial, ins.eps)


# ---- attention -------------------------------------------------------------------------------

@_runs(I.Attention, I.FlashAttention)
def _(ins, ops: Operands) -> None:
    """FlashAttention's block_size is the reference's key-block hint; the kernel tiles keys by its
    tuned BLOCK_N, which changes only the rounding, as the instruction allows."""
    from .kernels import attention

    count = ins.batch * ins.heads * ins.seq_len * ins.head_dim
    q, k, v = (ops.read(getattr(ins, nm), ins.ty, count, nm) for nm in ("query", "key", "value"))
    out = ops.output(ins.output, ins.ty, count, "output")
    attention.attention(q, k, v, out, ins.batch, ins.heads, ins.seq_len, ins.head_dim)


# ---- element-wise ----------------------------------------------------------------------------

@_runs(I.RoPE)
def _(ins, ops: Operands) -> None:
    from .kernels import elementwise

    if ins.head_dim % 2:
        raise BackendError(f"{ops.what}: head_dim ({ins.head_dim}) must be even: RoPE rotates pairs")
    count = ins.batch * ins.seq_len * ins.heads * ins.head_dim
    x = ops.read(ins.input, ins.ty, count, "input")
    f = ops.read(ins.freqs, ins.ty, ins.seq_len * (ins.head_dim // 2), "freqs")
    out = ops.output(ins.output, ins.ty, count, "output", in_place=True)
    elementwise.rope(x, f, out, ins.batch, ins.seq_len, ins.heads, ins.head_dim)


@_runs(I.LayerScale)
def _(ins, ops: Operands) -> None:
    from .kernels import elementwise

    x = ops.read(ins.input, ins.ty, ins.n, "input")
    s = ops.read(ins.scale, ins.ty, ins.n, "scale")
    elementwise.layer_scale(x, s, ops.output(ins.output, ins.ty, ins.n, "output", in_place=True), ins.n)


@_runs(I.KVCacheUpdate)
def _(ins, ops: Operands) -> None:
    n = ins.batch * ins.heads * ins.head_dim
    new = ops.read(ins.new_kv, ins.ty, n, "new_kv")
    ops.output(ins.cache, ins.ty, n, "cache", skip=ins.position * n * ins.ty.size_bytes, in_place=True).copy_(new)


# ---- vendor libraries through torch ----------------------------------------------------------

def _widen(t):
    """F16/BF16 computed in F32 (rounded once on the way back), others as they are."""
    import torch

    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


@_runs(I.Conv2D)
def _(ins, ops: Operands) -> None:
    """cuDNN through torch with TF32 off (TF32 keeps 10 mantissa bits: outside the ISA's bound)."""
    import torch

    (sh, sw), (ph, pw) = ins.stride, ins.padding
    if sh <= 0 or sw <= 0 or ph < 0 or pw < 0:
        raise BackendError(f"{ops.what}: stride {ins.stride} must be positive and padding {ins.padding} non-negative")
    b, ci, co, h, w, kh, kw = (ins.batch, ins.in_channels, ins.out_channels, ins.height, ins.width,
                               ins.kernel_h, ins.kernel_w)
    x = ops.read(ins.input, ins.ty, b * ci * h * w, "input").view(b, ci, h, w)
    k = ops.read(ins.kernel, ins.ty, co * ci * kh * kw, "kernel").view(co, ci, kh, kw)
    ho, wo = max((h + 2 * ph - kh) // sh + 1, 0), max((w + 2 * pw - kw) // sw + 1, 0)
    out = ops.output(ins.output, ins.ty, b * co * ho * wo, "output").view(b, co, ho, wo)
    if out.numel() == 0:
        return
    if ci == 0 or kh == 0 or kw == 0:  # an empty sum
        out.zero_()
        return
    conv = torch.backends.cudnn.conv
    before = conv.fp32_precision  # torch's new TF32 switch (mixing it with allow_tf32 is an error)
    conv.fp32_precision = "ieee"
    try:
        r = torch.nn.functional.conv2d(_widen(x), _widen(k), stride=(sh, sw), padding=(ph, pw))
    finally:
        conv.fp32_precision = before
    out.copy_(r)


@_runs(I.FFT)
def _(ins, ops: Operands) -> None:
    """cuFFT through torch.fft: the forward sign and the inverse's 1/n are NumPy's ("backward")."""
    import torch

    z = ops.read(ins.input, ins.ty, 2 * ins.n, "input")
    out = ops.output(ins.output, ins.ty, 2 * ins.n, "output")
    if ins.n == 0:
        raise BackendError(f"{ops.what}: FFT needs at least one point (n = 0)")
    c = torch.view_as_complex(_widen(z).view(ins.n, 2).contiguous())
    r = torch.fft.ifft(c) if ins.inverse else torch.fft.fft(c)
    out.copy_(torch.view_as_real(r).reshape(-1))


__all__ = ["EXTENSIONS", "ROUTES", "run", "source", "Operands"]
