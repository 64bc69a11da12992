"""Tensors split over the ranks of a device group (eidos.isa.distributed): each rank keeps its shard as a
Tensor on its own device between operations, and operations run on every rank at once.

`shard(ranks, x, axis)` splits by rows (axis 0) or columns (axis 1), `replicate(ranks, x)` puts the whole
on every rank. Element-wise operations are recorded in the driver and sent with the next operation that
needs the shards (one message for a chain and its use), lazy on each rank, so a chain fuses there as on
one device; reductions combine the ranks' partials by an AllReduce program on each rank's target; `a @ b`
is the model-parallel GEMM (rows @ replicated -> rows, replicated @ columns -> columns, columns @ rows -> the
partial products summed by AllReduce); `gather()` meets the shards on every rank by AllGather.
"""

from __future__ import annotations

import itertools
import operator

import numpy as np

from eidos.errors import ShapeError
from eidos.isa import instructions as I

from . import dtypes as D

_keys = itertools.count(1)
_UNARY = ("abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "floor", "ceil")
_REDUCE = {"sum": "Sum", "prod": "Product", "min": "Min", "max": "Max"}
# element-wise steps with an ISA map of their own: what a GPU rank's chain may hold to run as one program
_MAPS = {"abs": "Abs", "neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "sin": "Sin", "cos": "Cos",
         "tanh": "Tanh"}
_SCALAR_MAPS = {"add": "Add", "sub": "Sub", "mul": "Mul", "truediv": "Div"}


def _sizes(n: int, size: int) -> list[int]:
    from eidos.isa.distributed.executor import parts

    return parts(n, size)


class Sharded:
    """A tensor of `shape` over `ranks`: split along `axis` (sizes[r] along it on rank r) or, with axis None,
    whole on every rank."""

    def __init__(self, ranks, shape, dtype, axis, key=None, pending=None) -> None:
        self.ranks, self.shape, self._dtype, self.axis = ranks, tuple(shape), dtype, axis
        self.key = key or f"sharded-{next(_keys)}"
        self.sizes = None if axis is None else _sizes(self.shape[axis], ranks.size)
        self._pending = pending   # (operation, operands): an element-wise step not yet sent to the ranks

    @property
    def dtype(self) -> np.dtype:
        if self._dtype is None:
            self._send(None)
        return self._dtype

    def _send(self, fn, *args, others=()):
        """fn(rank, *args) on every rank in one message, after the element-wise steps this tensor (and
        `others`) still wait for, in order; rank 0's answer."""
        steps, seen = [], set()

        def visit(t):
            if not isinstance(t, Sharded) or t._pending is None or id(t) in seen:
                return
            seen.add(id(t))
            name, operands = t._pending
            for o in operands:
                visit(o)
            steps.append((t, name, [("s", o.key) if isinstance(o, Sharded) else ("v", o) for o in operands]))

        for t in (self, *others):
            visit(t)
        dtypes, got = self.ranks.run(_then, [(t.key, name, a) for t, name, a in steps], fn, args)[0]
        for (t, _, _), dt in zip(steps, dtypes):
            t._pending, t._dtype = None, np.dtype(dt)
        return got

    @property
    def devices(self) -> tuple[str, ...]:
        """Where the shards are: 'gpu:0', 'gpu:1', ... (or 'cpu:r' for CPU ranks)."""
        return self.ranks.devices

    def __repr__(self) -> str:
        how = "replicated" if self.axis is None else f"split on axis {self.axis} {self.sizes}"
        return f"Sharded(shape={self.shape}, dtype={self.dtype}, {how}, devices={self.devices})"

    # ---- element-wise: recorded here, sent with the next operation that needs the shards ------------
    def _apply(self, name: str, *others) -> Sharded:
        for o in others:
            if isinstance(o, Sharded) and (o.ranks is not self.ranks or o.shape != self.shape or o.axis != self.axis):
                raise ShapeError(f"{name}: sharded operands must have one shape and split ({self!r}, {o!r})")
        return Sharded(self.ranks, self.shape, None, self.axis, pending=(name, (self, *others)))

    def __add__(self, o):
        return self._apply("add", o)

    def __sub__(self, o):
        return self._apply("sub", o)

    def __mul__(self, o):
        return self._apply("mul", o)

    def __truediv__(self, o):
        return self._apply("truediv", o)

    def __neg__(self):
        return self._apply("neg")

    __radd__, __rmul__ = __add__, __mul__

    def __getattr__(self, name):
        if name in _UNARY:
            return lambda: self._apply(name)
        if name in _REDUCE:
            return lambda: self._reduce(name)
        raise AttributeError(name)

    # ---- reductions: partial on every rank, combined by AllReduce -------------------------------------
    def _reduce(self, name: str):
        return self._send(_reduce, self.key, name, self.axis is None)

    # ---- GEMM -----------------------------------------------------------------------------------------
    def __matmul__(self, other: Sharded) -> Sharded:
        if not isinstance(other, Sharded) or other.ranks is not self.ranks:
            raise ShapeError("@: both operands must be Sharded over the same ranks (replicate() a whole one)")
        if len(self.shape) != 2 or len(other.shape) != 2 or self.shape[1] != other.shape[0]:
            raise ShapeError(f"@: shapes {self.shape} and {other.shape} do not multiply")
        layout = (self.axis, other.axis)
        if layout not in ((0, None), (None, 1), (1, 0), (None, None)):
            raise ShapeError(f"@: splits {layout} (left, right axis) have no model-parallel form; use rows @ "
                             "replicated, replicated @ columns or columns @ rows")
        axis = {(0, None): 0, (None, 1): 1}.get(layout)
        out = Sharded(self.ranks, (self.shape[0], other.shape[1]), D.promote(self.dtype, other.dtype), axis)
        self._send(_matmul, out.key, self.key, other.key, layout == (1, 0), others=(other,))
        return out

    # ---- moving shards ------------------------------------------------------------------------------
    def gather(self) -> Sharded:
        """The whole tensor on every rank (AllGather over the group; shards padded to the largest)."""
        if self.axis is None:
            return self
        out = Sharded(self.ranks, self.shape, self.dtype, None)
        self._send(_gather, out.key, self.key, self.axis, self.sizes)
        return out

    def numpy(self) -> np.ndarray:
        """The whole tensor in this (the driver's) memory."""
        self._send(None)
        got = self.ranks.run(_fetch, self.key, self.axis is None)
        return got[0] if self.axis is None else np.concatenate(got, axis=self.axis)

    def realize(self) -> Sharded:
        """Compute the shards now, each rank waiting for its device (they are lazy until used)."""
        self._send(_realize, self.key)
        return self

    def free(self) -> None:
        """Drop the shards on the ranks (a step not yet sent is dropped; free after the tensor's last use)."""
        if self._pending is None:
            self.ranks.run(_free, self.key)
        self._pending = None


def shard(ranks, x, axis: int = 0) -> Sharded:
    """x (anything ei.tensor takes) split along axis 0 (rows) or 1 (columns) over the ranks."""
    x = np.asarray(x)
    if axis not in (0, 1) or x.ndim <= axis:
        raise ShapeError(f"shard: axis must be 0 or 1 and below the {x.ndim} dimensions, got {axis}")
    out = Sharded(ranks, x.shape, x.dtype, axis)
    cuts = np.cumsum([0, *out.sizes])
    ranks.run(_put, out.key, each=[(np.take(x, np.arange(cuts[r], cuts[r + 1]), axis=axis),)
                                   for r in range(ranks.size)])
    return out


def replicate(ranks, x) -> Sharded:
    """x whole on every rank."""
    x = np.asarray(x)
    out = Sharded(ranks, x.shape, x.dtype, None)
    ranks.run(_put, out.key, x)
    return out


def make(ranks, shape, dtype, axis, fill) -> Sharded:
    """A Sharded whose shards the ranks make themselves: fill(rank, shard_shape) -> anything ei.tensor takes
    (or a torch tensor on the rank's GPU), called on each rank; no data through the driver."""
    out = Sharded(ranks, shape, D.as_dtype(dtype), axis)
    local = [tuple(out.sizes[r] if a == axis else s for a, s in enumerate(shape)) for r in range(ranks.size)]
    ranks.run(_make, out.key, fill, str(out.dtype), each=[(s,) for s in local])
    return out


# ---- on each rank ------------------------------------------------------------------------------------

def _tensor(rank, x, dtype=None):
    from .array import from_dlpack, tensor

    if type(x).__module__ == "torch" and rank.device == "gpu":
        return from_dlpack(x)
    return tensor(x, dtype=dtype, device=rank.device)


def _raw(t):
    """The tensor's array (NumPy on the CPU, torch on the GPU), realized."""
    if t.device == "cpu":
        return np.ascontiguousarray(t.numpy())
    import torch

    return torch.from_dlpack(t).contiguous()


def _put(rank, key, x) -> None:
    rank.store[key] = _tensor(rank, x)


def _make(rank, key, fill, dtype, shape) -> None:
    rank.store[key] = _tensor(rank, fill(rank, shape), dtype)


def _then(rank, steps, fn, args):
    """The element-wise steps (lazy tensors of the rank's tensor layer, so a chain fuses), then fn."""
    dtypes = []
    for out, name, operands in steps:
        vals = [rank.store[v] if kind == "s" else v for kind, v in operands]
        f = getattr(operator, name, None)
        rank.store[out] = r = f(*vals) if f is not None else getattr(vals[0], name)()
        dtypes.append(str(r.dtype))
    if fn is _reduce:
        chain = _chain(rank, steps, *args)
        if chain is not None:
            return dtypes, chain()
    return dtypes, (fn(rank, *args) if fn is not None else None)


def _chain(rank, steps, key, name, replicated):
    """On a GPU rank, a chain of one shard's element-wise steps (maps, and arithmetic with a scalar) whose
    last result is reduced runs as the data-parallel executor's program: one fused pass, the reduction and
    the AllReduce, kept per (shard, chain) so its repeats replay one CUDA graph with no tensor-layer work
    per call. The ISA operations are those the tensor layer lowers the same steps to. A function that runs
    it, or None where the chain has another shape (the tensor layer then runs it)."""
    if rank.device != "gpu" or replicated or not steps or steps[-1][0] != key:
        return None
    kind, source = steps[0][2][0]
    if kind != "s":
        return None
    ops, prev = [], source
    for out, op, operands in steps:
        if tuple(operands[0]) != ("s", prev):
            return None
        if op in _MAPS and len(operands) == 1:
            ops.append((I.MapOperation[_MAPS[op]], None))
        elif op in _SCALAR_MAPS and len(operands) == 2 and operands[1][0] == "v" and _plain(operands[1][1]):
            ops.append((I.BinaryMapOperation[_SCALAR_MAPS[op]], operands[1][1]))
        else:
            return None
        prev = out
    t = rank.store[source]
    dtype = str(t.dtype)
    if dtype not in ("float32", "float64") or str(rank.store[key].dtype) != dtype or not t.size:
        return None
    from eidos.isa import Address
    from eidos.isa.distributed.executor import fused_reduce

    h = _adopted(rank, source)
    return lambda: fused_reduce(rank, source, Address.buffer(h), t.size, tuple(ops),
                                I.ReduceOperation[_REDUCE[name]], D.isa_type(np.dtype(dtype)))


def _plain(v) -> bool:
    """A Python number the ISA's immediate takes as the tensor layer takes a scalar operand."""
    return type(v) is float or (type(v) is int and abs(v) <= 2 ** 53)


def _adopted(rank, key) -> int:
    """The shard under key as a buffer of the rank's target, sharing its device memory: made once per
    shard (a new tensor under the key gets a new one)."""
    t = rank.store[key]
    hit = rank.store.get(("adopted", key))
    if hit is None or hit[0] is not t:
        _release(rank, key)
        raw = _raw(t)
        hit = rank.store["adopted", key] = (t, rank.target.adopt(raw))
    return hit[1]


def _release(rank, key) -> None:
    """Drop the buffer _adopted made for the shard under key, and the programs kept for it."""
    hit = rank.store.pop(("adopted", key), None)
    if hit is not None:
        from eidos.isa.distributed.executor import forget

        forget(rank, key)
        rank.target.free_buffer(hit[1])


def _realize(rank, key) -> None:
    t = rank.store[key]
    _raw(t)
    if t.device == "gpu":
        import torch

        torch.cuda.synchronize()


def _combine(rank, value, dtype: np.dtype, op_name: str):
    """value (the rank's partial: NumPy, or a tensor on the rank's GPU, which stays there) combined over
    the ranks by an AllReduce program on the rank's target. Its one-element buffer and program are kept
    per (type, operation) on the rank, so a repeated reduction allocates and plans nothing and waits for
    the device once (the read-back)."""
    from eidos.isa import Address, LaunchConfig, ProgramBuilder, ReduceOperation
    from eidos.isa import instructions as I

    ty, t = D.isa_type(dtype), rank.target
    hit = rank.store.get(("combine", ty, op_name))
    if hit is None:
        h = t.allocate_typed(1, ty)
        program = ProgramBuilder().add(I.AllReduce(Address.buffer(h), 1, ReduceOperation[op_name], ty=ty)).build()
        hit = rank.store["combine", ty, op_name] = (h, program)
    h, program = hit
    host = isinstance(value, (np.ndarray, np.generic))
    t.copy_to_buffer(h, np.asarray(value, ty.np_dtype).reshape(1) if host else value.reshape(1))
    t.execute_program(program, LaunchConfig.linear(1))
    out = np.empty(1, ty.np_dtype)
    t.copy_from_buffer(h, out)
    return out[0]


def _reduce(rank, key, name, replicated):
    t = rank.store[key]
    if not t.size:
        part = _identity(name, t.dtype)
        return part if replicated else _combine(rank, part, part.dtype, _REDUCE[name])
    part = getattr(t, name)()
    if replicated:
        return part.numpy()
    dtype = np.dtype(str(part.dtype))
    return _combine(rank, _raw(part), dtype, _REDUCE[name])


def _identity(name, dtype):
    dt = np.dtype("int64" if name in ("sum", "prod") and dtype.kind in "biu" else dtype)
    if name in ("sum", "prod"):
        return np.asarray(int(name == "prod"), dt)
    info = np.finfo(dt) if dt.kind == "f" else np.iinfo(dt)
    big = np.inf if dt.kind == "f" else (info.max if name == "min" else info.min)
    return np.asarray(big if name == "min" else -big if dt.kind == "f" else big, dt)


def _matmul(rank, out, a, b, partial) -> None:
    c = rank.store[a] @ rank.store[b]
    if partial:   # columns @ rows: every rank holds a partial product of the whole; AllReduce sums them
        raw = _raw(c)
        rank.group.all_reduce(raw.reshape(-1), _sum(), D.isa_type(np.dtype(str(c.dtype))))
        c = _tensor(rank, raw)
    rank.store[out] = c


def _sum():
    from eidos.isa import ReduceOperation

    return ReduceOperation.Sum


def _gather(rank, out, key, axis, sizes) -> None:
    part = _raw(rank.store[key])
    ty = D.isa_type(np.dtype(str(rank.store[key].dtype)))
    width, n = max(sizes), rank.size
    if isinstance(part, np.ndarray):
        xp, pad = np, np.zeros
    else:
        import torch as xp

        def pad(shape, dtype):
            return xp.zeros(shape, dtype=dtype, device=part.device)
    shape = list(part.shape)
    shape[axis] = width
    mine = pad(tuple(shape), part.dtype)
    (mine[:sizes[rank.rank]] if axis == 0 else mine[:, :sizes[rank.rank]])[...] = part
    whole = pad((n, *shape), part.dtype)
    rank.group.all_gather(whole.reshape(-1), mine.reshape(-1), ty)
    pieces = [whole[r, :sizes[r]] if axis == 0 else whole[r, :, :sizes[r]] for r in range(n)]
    rank.store[out] = _tensor(rank, np.concatenate(pieces, axis) if xp is np else xp.cat(pieces, axis))


def _fetch(rank, key, replicated):
    if replicated and rank.rank:
        return None
    t = rank.store[key]
    return t.numpy() if t.device == "cpu" else t.to("cpu").numpy()


def _free(rank, key) -> None:
    _release(rank, key)
    rank.store.pop(key, None)
