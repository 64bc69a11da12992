"""Realization: when a graph runs (on demand, or at once under `ei.eager()`), how its element-wise chains
fuse into one kernel (with a trailing reduction), dispatch of each program to a kernel target, and explain.

Fusion: an element-wise node's subgraph of unrealized element-wise nodes (and reshapes of one whose inputs
all have its full shape) becomes one Kernel (lower.py); a reduction takes its input's kernel in. Everything
else (layout, matmul, softmax, layer_norm, complex host calls) realizes its operands first.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from eidos.errors import EidosError
from eidos.isa import ExecutionParams

from . import backend as _backend
from . import dtypes as D
from . import lower as L
from . import storage as _dev
from .array import Const, Tensor
from .shapes import broadcast_shapes

__all__ = ["eager", "is_eager", "programs_executed", "realize", "explain"]


class _Eager(threading.local):
    """Per thread: whether `ei.eager()` is on (a class default, so the hot path reads `_local.eager` directly)."""
    eager = False


_local = _Eager()
_counters = {"programs": 0}
_small_kernel = _backend.small_kernel
_SMALL_TABLES = _backend._small       # (op -> its kernel memo by dtype)
_SMALL_MAX = _backend.SMALL_MAX_ELEMENTS


def programs_executed() -> int:
    """How many ISA programs tensor operations have run in this process (fusion is tested with it).

    >>> x = ei.tensor([1.0, 2.0, 3.0])
    >>> before = ei.tensor.programs_executed()
    >>> float(((x * 2 + 1).exp() * x).sum())  > 0   # four operations, one fused program
    True
    >>> ei.tensor.programs_executed() - before
    1
    """
    return _counters["programs"]


class eager:
    """`with ei.eager():` runs each tensor operation as soon as it is made (no graph, no fusion across
    operations). A class rather than a generator: entering it costs a fraction of a microsecond.

    >>> with ei.eager():
    ...     t = ei.tensor([1.0, 2.0]) + ei.tensor([3.0, 4.0])
    >>> t.is_realized
    True
    """

    __slots__ = ("old",)

    def __enter__(self):
        self.old = getattr(_local, "eager", False)
        _local.eager = True
        return self

    def __exit__(self, *exc):
        _local.eager = self.old
        return False


def is_eager() -> bool:
    """Whether `ei.eager()` is on in this thread.

    >>> with ei.eager():
    ...     ei.tensor.is_eager()
    True
    >>> ei.tensor.is_eager()
    False
    """
    return getattr(_local, "eager", False)




def _host(t: Tensor) -> np.ndarray:
    """t's values in host memory (a copy for a gpu tensor)."""
    a = _realize(t)
    if t.device == "cpu":
        return a
    return _dev.download(a) if t.device == "gpu" else _dev.remote().download(a)


def _small_data(op: str, a: Tensor, b):
    """The small eager path (docs/tensor.md): one element-wise operation whose operands are realized,
    contiguous, of one shape and dtype and at most SMALL_MAX_ELEMENTS, run at once by the cpu backend's
    kernel for it (the loop its one-instruction program runs), with no graph node, lowering or program
    object. (result array, explain record), or None where it does not apply (then the general path runs).
    The checks of the arrays are the kernel's own (fresh: see backend.small_kernel)."""
    try:
        k = _SMALL_TABLES[op][a.dtype]
    except KeyError:
        k = _small_kernel(op, a.dtype)
    if k is None:
        return None
    out = k[0](k[1], _SMALL_MAX, a._data) if b is None else k[0](k[1], _SMALL_MAX, a._data, b._data)
    if out is None:
        return None
    _counters["programs"] += 1
    return out, k[2]


EW_OPS = L.UNARY | L.BINARY | L.TERNARY
_N = D.NAME
MAP_ONLY = {"pow", "atan2"}


def realize(*tensors) -> None:
    """Run the graphs behind these tensors (each fused chain once); lists and tuples of tensors are walked.

    >>> a = ei.tensor([1, 2]) + 1
    >>> b = a * 10
    >>> ei.realize(a, [b])
    >>> a.is_realized and b.is_realized
    True
    """
    for t in tensors:
        if isinstance(t, Tensor):
            _realize(t)
        elif isinstance(t, (list, tuple)):
            realize(*t)


def _realize(t: Tensor) -> np.ndarray:
    if t._data is not None:
        return t._data
    if t.device[0] == "r":   # 'remote:...': the graph runs on the service its leaves are on
        return _dev.remote().realize(t)
    op = t._op
    if op in EW_OPS:
        _run_elementwise(t)
    elif op == "reduce":
        _run_reduce(t)
    elif op == "move":
        name, fn, _desc, param = t._attrs
        arrays = [_realize(a) for a in t._args]
        if t.device == "cpu":
            t._data = _host_array(fn(*arrays))
            t._runs.append((f"{name}", "host layout (NumPy view or copy), no program"))
        else:
            t._data = _dev.move(name, param, t.shape, arrays)
            t._runs.append((f"{name}", "device layout (torch view or copy), no program"))
        return _viewing(t, arrays)
    elif op == "host":
        name, fn, why = t._attrs
        arrays = [_realize(a) for a in t._args]
        with np.errstate(all="ignore"):
            t._data = _host_array(fn(*arrays))
        t._runs.append((name, why))
        return _viewing(t, arrays)
    elif op == "matmul":
        _run_matmul(t)
    elif op == "softmax":
        _run_softmax(t)
    elif op == "layer_norm":
        _run_layer_norm(t)
    else:
        raise EidosError(f"internal: no realization for {op}")
    t._args = ()
    return t._data


def _viewing(t: Tensor, arrays) -> np.ndarray:
    """A layout move or host call realized: its operands whose memory t's is a view of stay in t._args (t is a
    reader of them: a write into one first gives t its own copy, array.py's _before_write); the others go."""
    t._args = tuple(a for a, arr in zip(t._args, arrays) if _dev.shares(t._data, arr))
    return t._data


def _host_array(a) -> np.ndarray:
    """A host result as an array: NumPy gives a scalar, not a 0-d array, for an integer index of a 1-d array
    (`x[0]`), a ufunc of 0-d arrays and `a[()]`; a tensor's host data is always an ndarray (storage.py tells
    device data from host data by its type)."""
    return a if a.__class__ is np.ndarray else np.asarray(a)


class _Leaves:
    """A kernel's inputs: tensors, each with the shape it is viewed as (a reshape fused through), by slot;
    its constants' values, by index; whether it has an operation only the map form has (pow, atan2)."""

    def __init__(self) -> None:
        self.by_id: dict = {}
        self.tensors: list = []
        self.views: list = []
        self.values: list = []
        self.map_only = False

    def slot(self, t: Tensor, view=None) -> int:
        key = (id(t), view)
        s = self.by_id.get(key)
        if s is None:
            s = self.by_id[key] = len(self.tensors)
            self.tensors.append(t)
            self.views.append(view)
        return s

    def const(self, c: Const) -> L.Scalar:
        self.values.append(c.value)
        return L.Scalar(len(self.values) - 1, _N[c.dtype])

    def arrays(self):
        return [t._data if v is None else t._data.reshape(v) for t, v in zip(self.tensors, self.views)]


RESHAPES = ("reshape", "squeeze", "expand_dims")


def _collect(u, leaves: _Leaves, split_map_only: bool, root: bool = False, view=None):
    """The expression of u's element-wise subgraph. Reshapes of an element-wise subgraph whose inputs all
    have its full shape are fused through: each input is viewed with the reshape's shape (`view`)."""
    if isinstance(u, Const):
        return leaves.const(u)
    if u._data is None and u._op in EW_OPS and not (split_map_only and u._op in MAP_ONLY and not root):
        if u._op in MAP_ONLY:
            leaves.map_only = True
        return L.Apply(u._op, _N[u.dtype], tuple([_collect(a, leaves, split_map_only, False, view) for a in u._args]))
    if u._data is None and u._op == "move" and u._attrs[0] in RESHAPES:
        src = u._args[0]
        while src._data is None and src._op == "move" and src._attrs[0] in RESHAPES:
            src = src._args[0]
        if src._data is None and src._op in EW_OPS and _uniform(src, src.shape):
            return _collect(src, leaves, split_map_only, root, view if view is not None else u.shape)
    _realize(u)
    return L.Input(leaves.slot(u, view), _N[u.dtype])


def _uniform(u, shape) -> bool:
    """Whether every input of u's element-wise subgraph has exactly `shape` (no broadcasting inside)."""
    if isinstance(u, Const):
        return True
    if u.shape != shape:
        return False
    if u._data is None and u._op in EW_OPS:
        return all(_uniform(a, shape) for a in u._args)
    return True


def _gather(t: Tensor, kernel_of):
    """Collect t's element-wise subgraph; split pow/atan2 out when the rest needs the lane form."""
    leaves = _Leaves()
    expr = _collect(t, leaves, False, True)
    k = kernel_of(expr, leaves)
    if not leaves.map_only or L.map_form_ok(k):
        return k, leaves
    leaves = _Leaves()
    if t._op in MAP_ONLY:  # pow/atan2 itself: its operands become inputs
        leaves.map_only = True
        expr = L.Apply(t._op, _N[t.dtype], tuple([leaves.const(a) if isinstance(a, Const) else
                                                  _leaf_expr(a, leaves) for a in t._args]))
    else:
        expr = _collect(t, leaves, True, True)
    return kernel_of(expr, leaves), leaves


def _leaf_expr(a: Tensor, leaves: _Leaves):
    _realize(a)
    return L.Input(leaves.slot(a), _N[a.dtype])


def _run_elementwise(t: Tensor) -> None:
    n = t.size
    args = t._args
    if n <= _SMALL_MAX and 0 < len(args) <= 2 and type(args[0]) is Tensor and t.dtype == args[0].dtype \
            and args[0].shape == t.shape and (len(args) == 1 or type(args[1]) is Tensor):
        r = _small_data(t._op, args[0], args[1] if len(args) == 2 else None)
        if r is not None:
            t._data = r[0]
            t._runs.append(r[1])
            return

    def kernel_of(expr, leaves):
        return L.Kernel(expr, len(leaves.tensors), _N[t.dtype], n)

    k, leaves = _gather(t, kernel_of)
    xp = _dev.storage(t.device)
    out = xp.empty(t.shape, t.dtype)
    if n == 0:
        t._data = out
        return
    if k.expr.__class__ is L.Input:
        t._data = xp.layout(leaves.arrays()[0], t.shape)
        return
    args = [xp.layout(a, t.shape) for a in leaves.arrays()]
    _execute(t, k, args, out, leaves.values)
    t._data = out


def _run_reduce(t: Tensor) -> None:
    op, axes, keepdims, divisor = t._attrs
    x = t._args[0]
    kept = [i for i in range(x.ndim) if i not in axes]
    perm = kept + list(axes)
    m = math.prod(x.shape[i] for i in kept)
    r = math.prod(x.shape[i] for i in axes)

    def kernel_of(expr, leaves):
        return L.Kernel(expr, len(leaves.tensors), _N[t.dtype], m, op, r, divisor)

    if x._data is None and (x._op in EW_OPS or (x._op == "move" and x._attrs[0] in RESHAPES)):
        k, leaves = _gather(x, kernel_of)
        if not L.map_form_ok(k) and leaves.map_only:
            leaves = _Leaves()
            k = kernel_of(_leaf_expr(x, leaves), leaves)
    else:
        leaves = _Leaves()
        k = kernel_of(_leaf_expr(x, leaves), leaves)
    xp = _dev.storage(t.device)
    out = xp.empty(m, t.dtype)
    if m > 0:
        identity = perm == list(range(x.ndim))
        args = [xp.layout(a, x.shape, None if identity else perm) for a in leaves.arrays()]
        _execute(t, k, args, out, leaves.values)
    t._data = out.reshape(t.shape)


def _execute(t: Tensor, k: L.Kernel, args: list, out: np.ndarray, values: list) -> None:
    low = L.lower(k)
    full = list(args)
    full.append(out.reshape(-1))
    if low.temps:
        full += [_SCRATCH.scratch(dtype, count, slot, t.device) for slot, dtype, count in low.temps]
    nbytes = 0
    for a in args:
        nbytes += a.nbytes
    registers = {reg: L.register_value(values[i], dt) for i, reg, dt in low.params} if low.params else None
    _dispatch(t, low, full, k.kind, nbytes, k, registers)


def _describe(low: L.Lowered, what) -> str:
    if not isinstance(what, L.Kernel):
        return what
    k = what
    return (f"{low.form} form, {k.kind}" + (f" ({k.reduce} over {k.length} per output)" if k.reduce else "")
            + f", {_nops(k.expr)} op(s), {k.count} output element(s)")


def _nops(expr) -> int:
    return sum(1 for e in L.walk(expr) if e.__class__ is L.Apply)


def _dispatch(t: Tensor, low: L.Lowered, args, kind: str, nbytes: int, what, registers=None) -> None:
    props = _backend.OperationProperties(kind, nbytes, False, t.device)
    launch = low.config if not registers else ExecutionParams(low.config, registers)
    scratch = tuple(slot for slot, _, _ in low.temps) if low.temps else ()
    sel = _backend.run(low.program, args, launch, props, (low.out_slot,), scratch)
    _counters["programs"] += 1
    t._runs.append((low, what, sel))


class _ArrayCache:
    """Scratch arrays kept for reuse (an element-wise map's intermediates), least recently used first out,
    within a byte budget."""

    def __init__(self, budget_bytes: int) -> None:
        from collections import OrderedDict

        self.entries = OrderedDict()
        self.budget = budget_bytes
        self.nbytes = 0

    def _get(self, key, make):
        a = self.entries.get(key)
        if a is not None:
            self.entries.move_to_end(key)
            return a
        a = self.entries[key] = make()
        self.nbytes += a.nbytes
        while self.nbytes > self.budget and len(self.entries) > 1:
            _, old = self.entries.popitem(last=False)
            self.nbytes -= old.nbytes
        return a

    def scratch(self, dtype, count, slot, device="cpu"):
        return self._get((dtype, count, slot, device), lambda: _dev.storage(device).empty(count, D.NAMES[dtype]))

    def clear(self) -> None:
        self.entries.clear()
        self.nbytes = 0


_SCRATCH = _ArrayCache(256 << 20)


def _contig(t: Tensor):
    return _dev.storage(t.device).contiguous(_realize(t))


def _run_matmul(t: Tensor) -> None:
    a, b = t._args
    A, Bm = _realize(a), _realize(b)
    A2 = A.reshape(1, -1) if A.ndim == 1 else A
    B2 = B.reshape(-1, 1) if (B := Bm).ndim == 1 else B
    m, k, n = A2.shape[-2], A2.shape[-1], B2.shape[-1]
    batch = broadcast_shapes(A2.shape[:-2], B2.shape[:-2])
    dt = t.dtype
    cdt = dt if dt in D.FLOATS else D.float64
    xp = _dev.storage(t.device)
    A3 = xp.contiguous(xp.broadcast_to(A2, (*batch, m, k)), cdt)
    B3 = xp.contiguous(xp.broadcast_to(B2, (*batch, k, n)), cdt)
    nb = math.prod(batch)
    out = xp.empty((*batch, m, n), cdt)
    if t.size:
        if k == 0:
            out[...] = 0
        elif nb == 1:
            low = L.lower_extension("gemm", str(cdt), (m, n, k))
            _dispatch(t, low, [A3, B3, out], "matmul", A3.nbytes + B3.nbytes, f"GEMM {m}x{k} @ {k}x{n}")
        else:
            low = L.lower_extension("batched_gemm", str(cdt), (nb, m, n, k))
            _dispatch(t, low, [A3, B3, out], "matmul", A3.nbytes + B3.nbytes,
                      f"BatchedGEMM {nb} x ({m}x{k} @ {k}x{n})")
    if cdt != dt:
        out = xp.astype(out, dt)
    t._data = out.reshape(t.shape)


def _run_softmax(t: Tensor) -> None:
    (ax,) = t._attrs
    x = _realize(t._args[0])
    xp = _dev.storage(t.device)
    if x.ndim == 0:
        t._data = xp.full((), 1, t.dtype)
        return
    moved = xp.contiguous(xp.moveaxis(x, ax, -1))
    out = xp.empty(moved.shape, t.dtype)
    n = moved.shape[-1]
    rows = t.size // n if n else 0
    if rows:
        low = L.lower_extension("softmax", _N[t.dtype], (rows, n))
        _dispatch(t, low, [moved, out], "softmax", moved.nbytes, f"Softmax {rows} rows of {n}")
    t._data = xp.moveaxis(out, -1, ax)


def _run_layer_norm(t: Tensor) -> None:
    n, eps = t._attrs
    x, w, b = (_contig(a) for a in t._args)
    out = _dev.storage(t.device).empty(x.shape, t.dtype)
    rows = t.size // n if n else 0
    if rows:
        low = L.lower_extension("layer_norm", _N[t.dtype], (rows, n, eps))
        _dispatch(t, low, [x, w.reshape(-1), b.reshape(-1), out], "layer_norm", x.nbytes,
                  f"LayerNorm {rows} rows of {n}")
    t._data = out


# ---- explain ------------------------------------------------------------------------------------

def explain(t: Tensor) -> str:
    """What ran (or will run) for this tensor: programs, their form, backend chosen and rejected.

    >>> print(ei.tensor.explain(ei.tensor([1.0, 2.0]) * 2 + 1))
    Tensor shape=(2,) dtype=float64 device='cpu' (lazy)
    graph (runs when a value is needed):
      add -> (2,) float64
        mul -> (2,) float64
          tensor (2,) float64
          const 2.0 (float64)
        const 1.0 (float64)
    """
    lines = [f"Tensor shape={t.shape} dtype={t.dtype} device={t.device!r} "
             f"({'realized' if t._data is not None else 'lazy'})"]
    if t.device == "gpu":
        lines[0] += f"; gpu is {_dev.describe()}"
    if t._data is None:
        lines.append("graph (runs when a value is needed):")
        lines += _tree(t, 1)
    for run in t._runs:
        if len(run) == 3:
            low, what, sel = run
            lines.append(f"  ran: {_describe(low, what)}")
            lines.append(f"       {sel}")
        else:
            lines.append(f"  ran: {run[0]}")
            lines.append(f"       {run[1]}")
    if t._data is not None and not t._runs:
        lines.append("  (a leaf: data given, nothing ran)")
    return "\n".join(lines)


def _tree(t, depth: int) -> list:
    pad = "  " * depth
    if isinstance(t, Const):
        return [f"{pad}const {t.value!r} ({t.dtype})"]
    if t._data is not None:
        return [f"{pad}tensor {t.shape} {t.dtype}"]
    label = t._op if t._op not in ("move", "host") else t._attrs[0]
    if t._op == "reduce":
        label = f"{t._attrs[0]} axes={t._attrs[1]} keepdims={t._attrs[2]}" + (
            f" / {t._attrs[3]}" if t._attrs[3] else "")
    out = [f"{pad}{label} -> {t.shape} {t.dtype}"]
    for a in t._args:
        out += _tree(a, depth + 1)
    return out
