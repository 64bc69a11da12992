"""Run a plan on the device: Arrow columns in, ISA map steps and grouped reductions, Arrow out.

A frame is the plan's relation in flight on the device: one torch tensor per column (padded to whole
blocks), a U8 validity tensor where a column may hold nulls, and a row mask. Filters only narrow
the mask (rows are compacted once, when the result goes back to Arrow), so a Project after a Filter
runs on every row and its errors count only on the rows kept. Aggregations group on the device
(torch.unique over the key columns) and reduce with torch's scatter operations: the Atlas ISA has
no scatter or segmented reduction. Sums are exact: integers as two 32-bit halves, floats as
integer mantissas binned by exponent, added up exactly on the host per group (so float sums are
correctly rounded, as docs/semantics.md asks, whatever the order the device adds in).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from fractions import Fraction
from functools import singledispatch

import numpy as np
import pyarrow as pa

from eidos.errors import ExecutionError, UnsupportedError, shown
from eidos.hal.arrow import read_local
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.render import node_label
from eidos.ir.schema import Schema
from eidos.ir.typing import infer
from eidos.lanes.triton import translate as L
from eidos.lanes.triton.target import Device, target_name

# Torch holds each column in a type it fully supports: unsigned 16..64-bit integers in the signed type
# of their width (the same bytes; the ISA programs read them as unsigned, Arrow gets them back as such).
STORAGE = {"Int8": "int8", "Int16": "int16", "Int32": "int32", "Int64": "int64", "UInt8": "uint8",
           "UInt16": "int16", "UInt32": "int32", "UInt64": "int64", "Float32": "float32", "Float64": "float64",
           "Boolean": "uint8"}


def storage(t: T.DType, dev: Device):
    return getattr(dev.torch, STORAGE[t.name])


def widened(x, t: T.DType, dev: Device):
    """Integer values as int64 (unsigned below 64 bits zero-extended; UInt64 keeps its bits)."""
    torch = dev.torch
    v = x.to(torch.int64)
    if t.is_unsigned_integer and t.bits < 64:
        v = v & ((1 << t.bits) - 1)
    return v


@dataclass
class Column:
    values: object            # torch tensor, the frame's padded length
    valid: object | None      # uint8 tensor (1: not null); None: no nulls
    dtype: T.DType


@dataclass
class Frame:
    columns: dict[str, Column]
    n: int                    # rows before padding
    keep: object = None       # bool tensor of rows kept by filters; None: the first n rows
    padded: int = field(default=0)

    def mask(self, dev: Device):
        """The rows this frame holds, as a bool tensor over the padded length."""
        if self.keep is not None:
            return self.keep
        return dev.torch.arange(self.padded, device=dev.device) < self.n

    def schema(self) -> Schema:
        return Schema([(name, c.dtype) for name, c in self.columns.items()])


def execute(plan: N.Node, device: Device | None = None, devices: list[Device] | None = None) -> pa.Table:
    """The plan's result; with `devices` (or, on a host with several GPUs, for a row-wise part of many rows)
    split by rows over them (split.py)."""
    if devices is None and device is None:
        devices = _split_over(plan)
    if devices:
        from eidos.lanes.triton import split

        return split.execute(plan, devices, execute)
    dev = device or Device()
    try:
        return to_arrow(run(plan, dev), plan.schema, dev)
    finally:
        dev.release()


def _split_over(plan: N.Node) -> list[Device] | None:
    from eidos.lanes.triton import split

    if not split.rowwise(plan) or target_name() != "triton":
        return None
    k = split.gpus()
    if k < 2:
        return None
    rows = sum(n.source.estimated_rows or 0 for n in plan.walk() if isinstance(n, N.Scan))
    return [Device(index=i) for i in range(k)] if rows >= split.MIN_ROWS else None


@singledispatch
def run(node: N.Node, dev: Device) -> Frame:
    raise UnsupportedError(f"the triton lane has no rule for {type(node).__name__}")


# ---- Arrow in and out ------------------------------------------------------------------------

@run.register
def _(node: N.Scan, dev: Device) -> Frame:
    table = read_local(node.source, node.columns)
    n = table.num_rows
    padded = dev.rows(n)
    names = list(node.columns) if node.columns is not None else list(node.source.schema.names)
    cols = {name: column_to_device(table.column(name), node.source.schema[name], padded, dev) for name in names}
    dev.settle()
    return Frame(cols, n, None, padded)


def column_to_device(data: pa.ChunkedArray, dtype: T.DType, padded: int, dev: Device) -> Column:
    """One column on the device: Arrow's buffers are copied as they are (values under nulls included:
    every use of a value is gated by its validity), bitmaps unpacked to 0/1 bytes on the device."""
    torch = dev.torch
    arr = data.combine_chunks() if data.num_chunks != 1 else data.chunk(0)
    n = len(arr)
    validity, values = arr.buffers()[0], arr.buffers()[1]
    if dtype == T.Boolean:
        device_values = _bits(values, arr.offset, n, padded, dev)
    else:
        host = np.frombuffer(values, dtype=STORAGE[dtype.name], count=n, offset=arr.offset * (dtype.bits // 8)) \
            if n else np.empty(0, STORAGE[dtype.name])
        with warnings.catch_warnings():   # Arrow's buffers are read-only; they are only copied from
            warnings.simplefilter("ignore", UserWarning)
            device_values = _padded(torch.from_numpy(host), padded, dev)
    valid = _bits(validity, arr.offset, n, padded, dev) if arr.null_count and validity is not None else None
    return Column(device_values, valid, dtype)


def _bits(buffer: pa.Buffer, offset: int, n: int, padded: int, dev: Device):
    """An Arrow bitmap (LSB first, from bit `offset`) as n 0/1 bytes on the device, zero-padded."""
    torch = dev.torch
    first, last = offset // 8, (offset + n + 7) // 8
    raw = np.frombuffer(buffer, dtype=np.uint8, count=last - first, offset=first) if n else np.empty(0, np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        packed = dev.to_device(torch.from_numpy(raw))
    dev.settle()   # unpacked at once, on the compute stream
    shifts = torch.arange(8, dtype=torch.uint8, device=dev.device)
    bits = ((packed.unsqueeze(1) >> shifts) & 1).reshape(-1)[offset % 8:offset % 8 + n]
    out = torch.zeros(padded, dtype=torch.uint8, device=dev.device)
    out[:n] = bits
    return out


def _padded(host, padded: int, dev: Device):
    n = host.numel()
    t = dev.torch.empty(padded, dtype=host.dtype, device=dev.device)
    t[n:].zero_()
    dev.to_device(host, out=t[:n])
    return t


def to_arrow(frame: Frame, schema: Schema, dev: Device) -> pa.Table:
    rows = frame.mask(dev).nonzero().squeeze(1)
    cols = [frame.columns[name] for name in schema.names]
    host = iter(dev.to_host([x for c in cols for x in ((c.values[rows],) if c.valid is None else
                                                        (c.values[rows], c.valid[rows]))]))
    arrays = []
    for t, f, col in zip(schema.dtypes, schema.to_arrow(), cols):
        values = next(host)
        if t == T.Boolean:
            values = values.astype(bool)
        elif t.is_unsigned_integer:
            values = values.view(f"uint{t.bits}")
        mask = None if col.valid is None else next(host) == 0
        arrays.append(pa.array(values, type=f.type, mask=mask))
    return pa.Table.from_arrays(arrays, schema=schema.to_arrow())


# ---- map steps -----------------------------------------------------------------------------

def map_step(frame: Frame, outputs: list[tuple[str, E.Expr]], dev: Device, where: str) -> dict[str, Column]:
    """Compute named expressions over every row of the frame: plain column references are passed on,
    the rest run as one ISA program (after any `**` in them, see _powers)."""
    torch = dev.torch
    if any(isinstance(x, E.Call) and x.fn == "pow" for _, e in outputs for x in e.walk()):
        frame, outputs = _powers(frame, outputs, dev, where)
    done: dict[str, Column] = {}
    computed = []
    for name, e in outputs:
        bare = E.strip_alias(e)
        if isinstance(bare, E.Column):
            done[name] = frame.columns[bare.name]
        else:
            computed.append((name, e))
    if not computed:
        return done
    schema = frame.schema()
    nullable = frozenset(n for n, c in frame.columns.items() if c.valid is not None)
    step = L.step(schema, nullable, tuple(computed))
    pointers = iter(step.pointer_registers)
    regs: dict[int, int] = {}
    for name, _, has_valid in step.inputs:
        col = frame.columns[name]
        regs[next(pointers)] = dev.bind(col.values)
        if has_valid:
            regs[next(pointers)] = dev.bind(col.valid)
    for name, t, has_valid in step.outputs:
        values, h = dev.empty(frame.padded, storage(t, dev))
        regs[next(pointers)] = h
        valid = None
        if has_valid:
            valid, h = dev.empty(frame.padded, torch.uint8)
            regs[next(pointers)] = h
        done[name] = Column(values, valid, t)
    errors = None
    if step.sites:
        errors, h = dev.empty(frame.padded, torch.int32)
        regs[next(pointers)] = h
    dev.run(step.program, regs, frame.padded)
    if errors is not None:
        _raise_errors(errors, frame, step, dev, where)
    return done


def _powers(frame: Frame, outputs: list[tuple[str, E.Expr]], dev: Device, where: str):
    """`a ** b` has no register instruction, only the array operation ParallelMapBinary Pow: the
    innermost powers' operands are computed as Float64 columns, one array program raises them, and
    the expressions read the result as a column; repeated until no power is left. (A power inside
    when/then is a coverage gap: its operands would be computed for rows the branch does not take.)"""
    from eidos import isa

    torch = dev.torch
    while True:
        schema = frame.schema()
        inner: dict[E.Call, str] = {}
        for _, e in outputs:
            for x in e.walk():
                if isinstance(x, E.Call) and x.fn == "pow" and not any(
                        isinstance(y, E.Call) and y.fn == "pow" for a in x.args for y in a.walk()):
                    inner.setdefault(x, f"\0pow{len(frame.columns)}_{len(inner)}")
        if not inner:
            return frame, outputs
        operands = [(f"{name}{side}", E.Cast(arg, T.Float64)) for x, name in inner.items()
                    for side, arg in zip("ab", x.args)]
        cols = map_step(frame, operands, dev, where)
        added = {}
        for x, name in inner.items():
            a, b = cols[f"{name}a"], cols[f"{name}b"]
            result, h = dev.empty(frame.padded, torch.float64)
            program = isa.ProgramBuilder({"eidos.flow": "pow"}).add(isa.ParallelMapBinary(
                dst_array=isa.Address.buffer(h), src_a=isa.Address.buffer(dev.bind(a.values)),
                src_b=isa.Address.buffer(dev.bind(b.values)), count=frame.padded,
                operation=isa.BinaryMapOperation.Pow, ty=isa.Type.F64)).build()
            dev.backend.execute_program(program, isa.LaunchConfig.linear(1))
            valid = a.valid if b.valid is None else (b.valid if a.valid is None else a.valid & b.valid)
            rt = infer(x, schema)
            if rt == T.Float32:
                result = result.to(torch.float32)   # rounded once from the double result, as the reference
            added[name] = Column(result, valid, rt)
        frame = Frame({**frame.columns, **added}, frame.n, frame.keep, frame.padded)

        def swap(x: E.Expr, inner=inner) -> E.Expr:
            return E.Column(inner[x]) if isinstance(x, E.Call) and x in inner else x
        outputs = [(n, E.transform(e, swap)) for n, e in outputs]


def _raise_errors(errors, frame: Frame, step: L.Step, dev: Device, where: str) -> None:
    bad = (errors != 0) & frame.mask(dev)
    if not bool(bad.any()):
        return
    row = int(bad.nonzero()[0, 0])
    site = step.sites[int(errors[row]) - 1]
    values = ", ".join(f"{shown(name)}={_value_at(frame.columns[name], row)}" for name, _, _ in step.inputs)
    message = f"{site.text}\n  in {where}, on the row where {values}"
    raise (UnsupportedError if site.kind == L.UNSUPPORTED else ExecutionError)(message)


def _value_at(col: Column, row: int):
    if col.valid is not None and int(col.valid[row]) == 0:
        return None
    v = col.values[row].item()
    if col.dtype.is_unsigned_integer:
        return v & ((1 << col.dtype.bits) - 1)
    return bool(v) if col.dtype == T.Boolean else v


@run.register
def _(node: N.Project, dev: Device) -> Frame:
    frame = run(node.input, dev)
    cols = map_step(frame, list(node.columns), dev, node_label(node))
    return Frame({name: cols[name] for name, _ in node.columns}, frame.n, frame.keep, frame.padded)


@run.register
def _(node: N.Filter, dev: Device) -> Frame:
    frame = run(node.input, dev)
    (pred,) = map_step(frame, [("\0keep", node.predicate)], dev, node_label(node)).values()
    keep = pred.values != 0
    if pred.valid is not None:
        keep &= pred.valid != 0
    keep &= frame.mask(dev)
    return Frame(frame.columns, frame.n, keep, frame.padded)


@run.register
def _(node: N.Distinct, dev: Device) -> Frame:
    """One row per set of equal rows (null equals null, NaN equals NaN, -0.0 equals 0.0): each group's first."""
    frame = run(node.input, dev)
    if not frame.columns:
        return frame
    rows = frame.mask(dev).nonzero().squeeze(1)
    groups, _, cols = _groups(list(frame.columns.items()), rows, dev)
    padded = dev.rows(groups)
    return Frame({n: _padded_column(c, padded, dev) for n, c in cols.items()}, groups, None, padded)


@run.register
def _(node: N.Union, dev: Device) -> Frame:
    """Every row of every input, inputs in order."""
    torch = dev.torch
    parts = [run(i, dev) for i in node.inputs]
    kept = [p.mask(dev).nonzero().squeeze(1) for p in parts]
    n = sum(k.numel() for k in kept)
    padded = dev.rows(n)
    cols = {}
    for name, t in node.schema.items():
        values = torch.cat([p.columns[name].values[k] for p, k in zip(parts, kept)])
        nullable = any(p.columns[name].valid is not None for p in parts)
        valid = torch.cat([p.columns[name].valid[k] if p.columns[name].valid is not None
                           else torch.ones(k.numel(), dtype=torch.uint8, device=dev.device)
                           for p, k in zip(parts, kept)]) if nullable else None
        cols[name] = _padded_column(Column(values, valid, t), padded, dev)
    return Frame(cols, n, None, padded)


def _padded_column(c: Column, padded: int, dev: Device) -> Column:
    return Column(_padded(c.values, padded, dev), None if c.valid is None else _padded(c.valid, padded, dev), c.dtype)


# ---- aggregation ---------------------------------------------------------------------------

def _collect_aggs(e: E.Expr, found: dict[E.Agg, str]) -> E.Expr:
    def step(x: E.Expr) -> E.Expr:
        if isinstance(x, E.Agg):
            return E.Column(found.setdefault(x, f"\0agg{len(found)}"))
        return x
    return E.transform(e, step)


@run.register
def _(node: N.Aggregate, dev: Device) -> Frame:
    where = node_label(node)
    frame = run(node.input, dev)
    keys = map_step(frame, list(node.keys), dev, where)
    # aggregations may read computed keys by name, as if they were input columns
    wide = Frame({**frame.columns, **keys}, frame.n, frame.keep, frame.padded)
    found: dict[E.Agg, str] = {}
    outer = [(name, _collect_aggs(e, found)) for name, e in node.aggs]
    args = map_step(wide, [(f"\0arg{i}", a.arg) for i, a in enumerate(found) if a.arg is not None], dev, where)
    rows = frame.mask(dev).nonzero().squeeze(1)
    groups, inverse, key_cols = _groups([(n, keys[n]) for n, _ in node.keys], rows, dev)
    padded = dev.rows(groups)
    cols: dict[str, Column] = {n: _padded_column(c, padded, dev) for n, c in key_cols.items()}
    agg_schema = wide.schema()
    for i, (agg, name) in enumerate(found.items()):
        arg = args.get(f"\0arg{i}")
        result = infer(agg, agg_schema, allow_agg=True)
        values, valid = reduce(agg.fn, arg, rows, inverse, groups, result, dev, where)
        cols[name] = Column(_padded(values, padded, dev), None if valid is None else _padded(valid, padded, dev),
                            result)
    grouped = Frame(cols, groups, None, padded)
    out = map_step(grouped, outer, dev, where)
    return Frame({**{n: cols[n] for n, _ in node.keys}, **{n: out[n] for n, _ in node.aggs}}, groups, None, padded)


def _groups(keys: list[tuple[str, Column]], rows, dev: Device):
    """(number of groups, each kept row's group, the key columns per group). Null is a key of its own;
    floats group as semantics section 6 says (NaN with NaN, -0.0 with 0.0), each group keeping the
    key values of its first row."""
    torch = dev.torch
    if not keys:
        return 1, torch.zeros(rows.numel(), dtype=torch.int64, device=dev.device), {}
    if rows.numel() == 0:
        return 0, torch.zeros(0, dtype=torch.int64, device=dev.device), {
            n: Column(c.values[:0], None if c.valid is None else c.valid[:0], c.dtype) for n, c in keys}
    parts = []
    for _, c in keys:
        v = _group_bits(c.values[rows], c.dtype, dev)
        if c.valid is not None:
            ok = c.valid[rows].to(torch.int64)
            v = v * ok
            parts.append(ok)
        parts.append(v)
    _, inverse = torch.unique(torch.stack(parts, 1), dim=0, return_inverse=True)
    groups = int(inverse.max()) + 1
    position = torch.arange(rows.numel(), device=dev.device)
    first = torch.full((groups,), rows.numel(), dtype=torch.int64, device=dev.device)
    first = rows[first.scatter_reduce(0, inverse, position, "amin", include_self=False)]
    out = {name: Column(c.values[first].contiguous(), None if c.valid is None else c.valid[first].contiguous(),
                        c.dtype) for name, c in keys}
    return groups, inverse, out


def _group_bits(v, t: T.DType, dev: Device):
    """Values as int64 that are equal exactly when the values are equal as keys (NaN = NaN, -0.0 = 0.0)."""
    torch = dev.torch
    if v.dtype.is_floating_point:
        v = torch.where(torch.isnan(v), torch.full_like(v, math.nan), v + 0.0)   # one NaN; -0.0 + 0.0 is 0.0
        return (v.view(torch.int32) if v.dtype == torch.float32 else v.view(torch.int64)).to(torch.int64)
    return widened(v, t, dev)


def group_sum(values, idx, groups: int, dev: Device):
    """Per-group sums of int64 (exact) or float values: one tree reduction for a single group (no
    atomics on one address), else index_add."""
    if groups == 1:
        return values.sum().reshape(1)
    return dev.torch.zeros(groups, dtype=values.dtype, device=dev.device).index_add_(0, idx, values)


def group_extreme(values, idx, groups: int, kind: str, dev: Device):
    """Per-group amin/amax (groups without values get 0: their validity says null)."""
    torch = dev.torch
    if groups == 1:
        if values.numel() == 0:
            return torch.zeros(1, dtype=values.dtype, device=dev.device)
        return (values.amin() if kind == "amin" else values.amax()).reshape(1)
    out = torch.zeros(groups, dtype=values.dtype, device=dev.device)
    return out.scatter_reduce(0, idx, values, kind, include_self=False)


def reduce(fn: str, arg: Column | None, rows, inverse, groups: int, result: T.DType, dev: Device, where: str):
    """One aggregation per group: (values, validity or None) as tensors of `groups` elements."""
    torch = dev.torch
    if fn == "count_rows":
        return group_sum(torch.ones_like(inverse), inverse, groups, dev), None
    ok = (arg.valid[rows] != 0) if arg.valid is not None else torch.ones(rows.numel(), dtype=torch.bool,
                                                                          device=dev.device)
    counts = group_sum(ok.to(torch.int64), inverse, groups, dev)
    if fn == "count":
        return counts, None
    present = (counts > 0).to(torch.uint8)
    idx, x = inverse[ok], arg.values[rows][ok]
    if fn == "n_unique":
        pairs = torch.unique(torch.stack([idx, _group_bits(x, arg.dtype, dev)], 1), dim=0)
        return torch.bincount(pairs[:, 0], minlength=groups).to(torch.int64), None
    if fn in ("min", "max"):
        return _extreme(fn, x, idx, groups, arg.dtype, dev), present
    if arg.dtype.is_float:
        sums = _float_sums(x.to(torch.float64), idx, groups, dev)
    else:
        sums = _int_sums(x, idx, groups, arg.dtype, dev)
    n = counts.cpu().tolist()
    if fn == "sum":
        if result.is_integer:
            lo, hi = T.int_range(result)
            for s in sums:
                if s is not None and not lo <= s <= hi:
                    raise ExecutionError(f"integer overflow: sum = {s} does not fit in {result} ({lo}..{hi})\n"
                                         f"  in {where}")
        out = [0 if not k else s for s, k in zip(sums, n)]
        host = np.array(out, dtype=result.to_arrow().to_pandas_dtype())   # Int64, UInt64 or Float64
        return dev.torch.from_numpy(host.view(STORAGE[result.name])).to(dev.device), present
    if fn == "mean":
        out = [0.0 if not k else s / k for s, k in zip(sums, n)]   # exact sums, one rounded division
        return torch.tensor(out, dtype=torch.float64).to(dev.device), present
    if fn in ("std", "var") and arg.dtype.is_float:
        # as the reference: m = fsum / n, then fsum((x - m)**2) / (n - 1); NaN or inf anywhere gives NaN
        means = torch.tensor([s / k if k else 0.0 for s, k in zip(sums, n)], dtype=torch.float64).to(dev.device)
        d = x.to(torch.float64) - means[idx]
        squares = _float_sums(d * d, idx, groups, dev)
        out = [v / (k - 1) if k >= 2 else 0.0 for v, k in zip(squares, n)]
        if fn == "std":
            out = [math.sqrt(v) if v >= 0 or v != v else v for v in out]
        return torch.tensor(out, dtype=torch.float64).to(dev.device), (counts >= 2).to(torch.uint8)
    if fn in ("std", "var"):
        # integers exactly, as the reference: (n * sum(x^2) - sum(x)^2) / (n (n - 1)), rounded once
        squares = _int_square_sums(x, idx, groups, arg.dtype, dev)
        out = [float(Fraction(k * q - t * t, k * (k - 1))) if k >= 2 else 0.0 for t, q, k in zip(sums, squares, n)]
        if fn == "std":
            out = [math.sqrt(v) for v in out]
        return torch.tensor(out, dtype=torch.float64).to(dev.device), (counts >= 2).to(torch.uint8)
    raise UnsupportedError(f"the triton lane has no device form for the aggregation {fn}")


def _int_sums(x, idx, groups: int, dtype: T.DType, dev: Device) -> list[int]:
    """Exact integer sums per group: the low and high 32-bit halves add up in int64 without overflow
    (for fewer than 2**31 rows), and are joined in Python integers."""
    v = widened(x, dtype, dev)
    low = v & 0xFFFFFFFF
    high = v >> 32
    if dtype == T.UInt64:
        high = high & 0xFFFFFFFF
    lo = group_sum(low, idx, groups, dev).cpu().tolist()
    hi = group_sum(high, idx, groups, dev).cpu().tolist()
    return [(h << 32) + l for h, l in zip(hi, lo)]


def _int_square_sums(x, idx, groups: int, dtype: T.DType, dev: Device) -> list[int]:
    """Exact sums of x**2 per group: x in four 16-bit limbs (the top one signed, unless unsigned), each
    product of two limbs below 2**32 in magnitude, so their int64 sums cannot overflow."""
    v = widened(x, dtype, dev)
    top = (v >> 48) & 0xFFFF if dtype == T.UInt64 else v >> 48
    limbs = [(v >> (16 * i)) & 0xFFFF for i in range(3)] + [top]
    total = [0] * groups
    for i in range(4):
        for j in range(i, 4):
            part = group_sum(limbs[i] * limbs[j], idx, groups, dev).cpu().tolist()
            scale = (1 if i == j else 2) << (16 * (i + j))
            total = [t + p * scale for t, p in zip(total, part)]
    return total


EXPONENTS = 2200          # exponent bins per group: frexp exponents - 53 run from -1126 to 971
EXPONENT_BASE = 1126
DENSE_BINS = 1 << 16      # up to this many (group, exponent) bins are added densely


def _float_sums(x, idx, groups: int, dev: Device) -> list[float]:
    """Correctly rounded float sums per group (math.fsum's answer): every finite value is an integer
    mantissa m < 2**53 times 2**e; the mantissas are split in halves and added per (group, e) on the
    device, exactly, and each group's total is one Python integer divided once by a power of two.
    NaN, or inf with -inf, gives NaN; otherwise an infinity gives that infinity."""
    torch = dev.torch
    finite = torch.isfinite(x)
    flags = torch.stack([group_sum(bad.to(torch.int64), idx, groups, dev)
                         for bad in (torch.isnan(x), x == math.inf, x == -math.inf)], 1)
    mantissa, exponent = torch.frexp(x[finite])
    m = (mantissa * 2.0 ** 53).to(torch.int64)
    key = idx[finite] * EXPONENTS + (exponent.to(torch.int64) - 53 + EXPONENT_BASE)
    high = m >> 26
    low = m - (high << 26)
    if groups * EXPONENTS <= DENSE_BINS:   # few groups: every (group, exponent) its own bin, no sort
        zeros = torch.zeros(groups * EXPONENTS, dtype=torch.int64, device=dev.device)
        hi_t, lo_t = zeros.clone().index_add_(0, key, high), zeros.clone().index_add_(0, key, low)
        used = (hi_t != 0) | (lo_t != 0)
        bins, hi, lo = (t.cpu().tolist() for t in (used.nonzero().squeeze(1), hi_t[used], lo_t[used]))
    else:
        bins_t, where = torch.unique(key, return_inverse=True)
        zeros = torch.zeros(bins_t.numel(), dtype=torch.int64, device=dev.device)
        hi = zeros.clone().index_add_(0, where, high).cpu().tolist()
        lo = zeros.clone().index_add_(0, where, low).cpu().tolist()
        bins = bins_t.cpu().tolist()
    totals = [0] * groups
    for k, h, l in zip(bins, hi, lo):
        g, e = divmod(k, EXPONENTS)
        totals[g] += ((h << 26) + l) << e   # e counts up from 2**-1126
    out = []
    for total, (nan, pos, neg) in zip(totals, flags.cpu().tolist()):
        if nan or (pos and neg):
            out.append(math.nan)
        elif pos or neg:
            out.append(math.inf if pos else -math.inf)
        else:
            try:
                out.append(total / (1 << EXPONENT_BASE))
            except OverflowError:
                out.append(math.inf if total > 0 else -math.inf)
    return out


def _extreme(fn: str, x, idx, groups: int, dtype: T.DType, dev: Device):
    """min/max per group in the order of semantics section 8: NaN is the largest value."""
    torch = dev.torch
    kind = "amin" if fn == "min" else "amax"
    if dtype.is_float:
        nan = torch.isnan(x)
        fill = math.inf if fn == "min" else -math.inf
        numbers = torch.where(nan, torch.full_like(x, fill), x)
        out = group_extreme(numbers, idx, groups, kind, dev)
        nans = group_sum(nan.to(torch.int64), idx, groups, dev)
        sizes = group_sum(torch.ones_like(idx), idx, groups, dev)
        is_nan = (nans > 0) if fn == "max" else ((nans == sizes) & (sizes > 0))
        return torch.where(is_nan, torch.full_like(out, math.nan), out)
    if dtype == T.UInt64:   # unsigned order as signed order with the top bit flipped
        return group_extreme(x ^ (-(2 ** 63)), idx, groups, kind, dev) ^ (-(2 ** 63))
    return group_extreme(widened(x, dtype, dev), idx, groups, kind, dev).to(x.dtype)
