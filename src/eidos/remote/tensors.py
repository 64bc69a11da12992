"""A lazy Tensor graph as JSON and back: how tensor work travels to an eidos service (issue 14).

The document is untrusted where it is decoded. Each node names an operation from a closed table, and the
table rebuilds it with the tensor layer's own builders (eidos.tensor.ops), so a graph from the network is
one the local API could have built, checked by the same rules; every field is checked before that (types,
dtypes, shapes, axes, counts, sizes), and no name in a document chooses what is imported or called (a
layout node's NumPy function is the builder's, found by the node's name). Shared subgraphs travel once:
nodes in topological order, operands by index. Realized tensors travel as leaves, by the id each was
uploaded under.

    {"format": "eidos.tensor-graph", "version": 1, "outputs": [2],
     "nodes": [{"op": "leaf", "id": 7, "shape": [3], "dtype": "float32"},
               {"op": "const", "value": 2.0, "dtype": "float32"},
               {"op": "mul", "args": [0, 1], "shape": [3], "dtype": "float32"}]}
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from eidos import jsondoc
from eidos.errors import BackendUnavailable, DeviceError, EidosError, PlanError, UnsupportedError, shown
from eidos.tensor import dtypes as D
from eidos.tensor import ops as O
from eidos.tensor.array import Const, Tensor

__all__ = ["FORMAT", "VERSION", "encode", "decode", "run", "server_device"]

FORMAT = "eidos.tensor-graph"
VERSION = 1
MAX_NODES = 10_000          # nodes in one document
MAX_DEPTH = 128             # operations on the longest path (realization recurses along it)
MAX_ELEMENTS = 1 << 32      # elements of any one node
MAX_NDIM = 32
MAX_ARGS = 4096            # operands of one concat
MAX_KEY = 1 << 20           # elements of an index array in a getitem key
_ID_MAX = (1 << 63) - 1

_DTYPES = {n: d for n, d in D.NAMES.items() if d not in D.COMPLEX}   # complex work runs on the host: not here

# element-wise operations: the node's op -> its builder (the op names are realization's; lower.py)
UNARY = {"abs": O.abs, "neg": O.negative, "sqrt": O.sqrt, "exp": O.exp, "log": O.log, "sin": O.sin,
         "cos": O.cos, "tan": O.tan, "tanh": O.tanh, "sigmoid": O.sigmoid, "gelu": O.gelu, "relu": O.relu,
         "floor": O.floor, "ceil": O.ceil, "trunc": O.trunc, "round": O.round, "sign": O.sign,
         "logical_not": O.logical_not, "invert": O.bitwise_invert, "isnan": O.isnan, "isinf": O.isinf,
         "isfinite": O.isfinite, "reciprocal": O.reciprocal, "square": O.square}
BINARY = {"add": O.add, "sub": O.subtract, "mul": O.multiply, "div": O.divide, "pow": O.pow,
          "minimum": O.minimum, "maximum": O.maximum, "atan2": O.atan2, "floordiv": O.floor_divide,
          "mod": O.remainder, "and": O.bitwise_and, "or": O.bitwise_or, "xor": O.bitwise_xor,
          "lshift": O.bitwise_left_shift, "rshift": O.bitwise_right_shift, "eq": O.equal, "ne": O.not_equal,
          "lt": O.less, "le": O.less_equal, "gt": O.greater, "ge": O.greater_equal,
          "logical_and": O.logical_and, "logical_or": O.logical_or, "logical_xor": O.logical_xor}
TERNARY = {"where": O.where, "clip": O.clip}
REDUCTIONS = ("sum", "prod", "min", "max", "argmin", "argmax")
MOVES = ("reshape", "transpose", "squeeze", "expand_dims", "expand", "concat", "getitem")

# each op: (number of operands, None for one or more; the fields a node of it has beside op, args, shape, dtype)
_OPS: dict[str, tuple[int | None, frozenset]] = {
    **{op: (1, frozenset()) for op in UNARY}, **{op: (2, frozenset()) for op in BINARY},
    **{op: (3, frozenset()) for op in TERNARY}, "cast": (1, frozenset()),
    "reduce": (1, frozenset({"reduce", "axes", "keepdims", "divisor"})), "matmul": (2, frozenset()),
    "softmax": (1, frozenset({"axis"})), "layer_norm": (3, frozenset({"eps"})),
    "reshape": (1, frozenset()), "transpose": (1, frozenset({"axes"})), "squeeze": (1, frozenset({"axes"})),
    "expand_dims": (1, frozenset({"axis"})), "expand": (1, frozenset()), "concat": (None, frozenset({"axis"})),
    "getitem": (1, frozenset({"key"})),
}
OPS = ("leaf", "const", *_OPS)


# ---- encoding -------------------------------------------------------------------------------------

def encode(tensors: Tensor | Sequence[Tensor], leaf_id: Callable[[Tensor], int]) -> dict:
    """The graphs behind `tensors` as one JSON document; `leaf_id(t)` is called once for each realized tensor
    the graphs read and gives the id its data was uploaded under. UnsupportedError for what cannot travel
    (complex numbers, which run as host NumPy calls; a getitem key that is not made of ints, slices, None,
    Ellipsis and integer or boolean arrays)."""
    outs = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    index: dict[int, int] = {}
    nodes: list[dict] = []
    alive: list = []   # every object indexed, kept alive so that no id() is reused while encoding
    for root in outs:
        if not isinstance(root, Tensor):
            raise PlanError(f"encode takes tensors, got {type(root).__name__}")
        stack = [(root, False)]
        while stack:  # depth first, without recursion: a node after its operands
            t, ready = stack.pop()
            if id(t) in index:
                continue
            if not ready and isinstance(t, Tensor) and t._data is None:
                stack.append((t, True))
                stack.extend((a, False) for a in reversed(t._args) if id(a) not in index)
                continue
            nodes.append(_encode_node(t, index, leaf_id))
            index[id(t)] = len(nodes) - 1
            alive.append(t)
    return {"format": FORMAT, "version": VERSION, "nodes": nodes, "outputs": [index[id(t)] for t in outs]}


def _encode_node(t, index: dict, leaf_id) -> dict:
    if isinstance(t, Const):
        if t.dtype in D.COMPLEX:
            raise UnsupportedError(_COMPLEX)
        return {"op": "const", "value": _number(t.value), "dtype": D.NAME[t.dtype]}
    if t.dtype in D.COMPLEX:
        raise UnsupportedError(_COMPLEX)
    base = {"shape": list(t.shape), "dtype": D.NAME[t.dtype]}
    if t._data is not None:
        return {"op": "leaf", "id": int(leaf_id(t)), **base}
    args = [index[id(a)] for a in t._args]
    op, attrs = t._op, t._attrs
    if op == "host":
        raise UnsupportedError(f"{attrs[0]}: {_COMPLEX}")
    if op in UNARY or op in BINARY or op in TERNARY or op in ("cast", "matmul"):
        return {"op": op, "args": args, **base}
    if op == "reduce":
        name, axes, keepdims, divisor = attrs
        return {"op": op, "args": args, "reduce": name, "axes": list(axes), "keepdims": keepdims,
                "divisor": _number(divisor), **base}
    if op == "softmax":
        return {"op": op, "args": args, "axis": attrs[0], **base}
    if op == "layer_norm":
        return {"op": op, "args": args, "eps": _number(attrs[1]), **base}
    if op == "move":
        name, _fn, desc, param = attrs
        extra: dict[str, Any] = {}
        if name == "transpose":
            extra["axes"] = list(param)
        elif name == "squeeze":
            extra["axes"] = [int(a) for a in re.findall(r"-?\d+", desc)]   # desc: str() of the axes tuple
        elif name == "expand_dims":
            extra["axis"] = int(desc)
        elif name == "concat":
            extra["axis"] = int(param)
        elif name == "getitem":
            extra["key"] = _encode_key(param)
        elif name not in ("reshape", "expand"):
            raise UnsupportedError(f"the layout operation {name!r} has no remote form; layout operations: "
                                   f"{', '.join(MOVES)}")
        return {"op": name, "args": args, **extra, **base}
    raise UnsupportedError(f"the tensor operation {op!r} has no remote form; operations: {', '.join(OPS)}")


_COMPLEX = ("complex numbers are computed by host NumPy calls, which do not travel to a service; "
            "compute them locally (.to('cpu'))")


def _number(v) -> int | float | bool | str:
    """A number as JSON: non-finite floats as the strings 'nan', 'inf', '-inf' (JSON has no such numbers)."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    v = float(v)
    return v if math.isfinite(v) else repr(v)


def _encode_key(key) -> list:
    out = []
    for k in key if isinstance(key, tuple) else (key,):
        if k is None:
            out.append("newaxis")
        elif k is Ellipsis:
            out.append("...")
        elif isinstance(k, (bool, np.bool_)):
            out.append({"array": [bool(k)], "shape": [], "dtype": "bool"})
        elif isinstance(k, (int, np.integer)):
            out.append(int(k))
        elif isinstance(k, slice) and all(v is None or isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                          for v in (k.start, k.stop, k.step)):
            out.append({"slice": [None if v is None else int(v) for v in (k.start, k.stop, k.step)]})
        elif isinstance(k, np.ndarray) and (k.dtype == np.bool_ or k.dtype.kind in "iu"):
            a = k if k.dtype == np.bool_ else k.astype(np.int64)
            out.append({"array": a.reshape(-1).tolist(), "shape": list(a.shape),
                        "dtype": "bool" if a.dtype == np.bool_ else "int64"})
        else:
            raise UnsupportedError(f"getitem: the key part {k!r} cannot travel; parts: ints, slices of ints, None, "
                                   "Ellipsis, integer or boolean arrays")
    return out


# ---- decoding -------------------------------------------------------------------------------------

class _Value:
    """A decoded constant: a Python scalar, given to the builders as the scalar operand it was."""
    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value


def decode(doc, leaves: Mapping[int, Tensor], *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH,
           max_elements: int = MAX_ELEMENTS, max_bytes: int | None = None) -> list[Tensor]:
    """The lazy graph a document describes, over `leaves` (the tensors its leaf ids name): one tensor per
    output. PlanError (or UnsupportedError) naming the node and what is wrong, for any document `encode`
    would not make, or a node over the limits (`max_bytes`: a service's memory for one client); nothing else."""
    doc = jsondoc.read(doc, error=PlanError, what="a tensor graph", max_depth=8)
    _fields(doc, "the tensor graph", {"format", "version", "nodes", "outputs"}, {"format", "version", "nodes",
                                                                                 "outputs"})
    if doc["format"] != FORMAT or doc["version"] != VERSION:
        raise PlanError(f"not a tensor graph this eidos reads: format {jsondoc.show(doc['format'])} version "
                        f"{jsondoc.show(doc['version'])}; expected {FORMAT!r} version {VERSION}")
    nodes = doc["nodes"]
    if not isinstance(nodes, list) or not 0 < len(nodes) <= max_nodes:
        raise PlanError(f"the tensor graph's nodes must be a list of 1 to {max_nodes} nodes, got "
                        f"{jsondoc.show(nodes) if not isinstance(nodes, list) else f'{len(nodes)} nodes'}")
    built: list = []
    depth: list[int] = []
    for i, node in enumerate(nodes):
        t, d = _decode_node(i, node, built, depth, leaves, max_elements)
        if max_bytes is not None and isinstance(t, Tensor) and t.size * t.dtype.itemsize > max_bytes:
            raise PlanError(f"node {i}: a {t.dtype} tensor of shape {t.shape} needs {t.size * t.dtype.itemsize:,} "
                            f"bytes, more than the {max_bytes:,} this service gives one client")
        if d > max_depth:
            raise PlanError(f"node {i}: the graph is {d} operations deep, more than the {max_depth} a service "
                            "runs in one graph; realize part of it first (ei.realize) and send the rest")
        built.append(t)
        depth.append(d)
    outputs = doc["outputs"]
    if not isinstance(outputs, list) or not 0 < len(outputs) <= max_nodes:
        raise PlanError(f"the tensor graph's outputs must be a list of 1 to {max_nodes} node indices, got "
                        f"{jsondoc.show(outputs)}")
    out = []
    for j, o in enumerate(outputs):
        k = _int(o, f"output {j}", 0, len(built) - 1)
        if not isinstance(built[k], Tensor):
            raise PlanError(f"output {j} is node {k}, a constant; an output is a tensor")
        out.append(built[k])
    return out


def _decode_node(i: int, node, built: list, depth: list, leaves: Mapping, max_elements: int):
    where = f"node {i}"
    if not isinstance(node, dict):
        raise PlanError(f"{where} must be an object, got {jsondoc.show(node)}")
    op = node.get("op")
    if op == "const":
        _fields(node, where, {"op", "value", "dtype"}, {"op", "value", "dtype"})
        dt = _dtype(node["dtype"], where)
        return _Value(_scalar(node["value"], dt, where)), 0
    if op == "leaf":
        _fields(node, where, {"op", "id", "shape", "dtype"}, {"op", "id", "shape", "dtype"})
        return _leaf(node, where, leaves, max_elements), 0
    if not isinstance(op, str) or op not in _OPS:
        if op == "host":
            raise UnsupportedError(f"{where}: 'host' nodes (complex numbers, computed by host NumPy calls) do not "
                                   "travel; compute them locally")
        raise PlanError(f"{where}: unknown operation {shown(op) if isinstance(op, str) else jsondoc.show(op)}; "
                        f"operations: {', '.join(OPS)}")
    arity, extra = _OPS[op]
    _fields(node, f"{where} ({op})", {"op", "args", "shape", "dtype"} | extra, {"op", "args", "shape", "dtype"} | extra)
    where = f"node {i} ({op})"
    shape = _shape(node["shape"], where, max_elements)
    dtype = _dtype(node["dtype"], where)
    args = node["args"]
    if not isinstance(args, list) or (len(args) != arity if arity is not None else not 0 < len(args) <= MAX_ARGS):
        raise PlanError(f"{where}: args must be a list of {arity or 'one or more'} node indices, got "
                        f"{jsondoc.show(args)}")
    operands = []
    for a in args:
        if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a < i:
            raise PlanError(f"{where}: operand {jsondoc.show(a)} is not an earlier node (0..{i - 1}); operands come "
                            "before the nodes that read them, so a graph has no cycles")
        operands.append(built[a])
    scalars = [k for k, v in enumerate(operands) if isinstance(v, _Value)]
    if scalars and (op not in BINARY and op not in TERNARY or len(scalars) == len(operands)
                    or (op in ("where", "clip") and 0 in scalars)):
        raise PlanError(f"{where}: a constant can only be an element-wise operation's scalar operand, beside a "
                        f"tensor (operand {scalars[0]} is one)")
    try:
        t = _build(op, node, operands, shape, dtype, where, max_elements)
    except EidosError as e:
        raise PlanError(f"{where}: {e}") from e
    if not isinstance(t, Tensor) or t.shape != shape or t.dtype != dtype:
        raise PlanError(f"{where}: declares shape {shape} and dtype {dtype}, but its operands give shape "
                        f"{getattr(t, 'shape', None)} and dtype {getattr(t, 'dtype', None)}")
    return t, 1 + max((depth[a] for a in args), default=0)


def _build(op: str, node: dict, xs: list, shape: tuple, dtype, where: str, max_elements: int) -> Tensor:
    """The node rebuilt by the tensor layer's builder for its op (operands already checked)."""
    vals = [x.value if isinstance(x, _Value) else x for x in xs]
    if op in UNARY:
        return UNARY[op](vals[0])
    if op in BINARY:
        return BINARY[op](*vals)
    if op in TERNARY:
        return TERNARY[op](*vals)
    x = vals[0]
    if op == "cast":
        return O.astype(x, dtype)
    if op == "matmul":
        return O.matmul(*vals)
    if op == "reduce":
        return _reduce(node, x, dtype, where)
    if op == "softmax":
        return O.softmax(x, _int(node["axis"], f"{where} axis", -64, 64))
    if op == "layer_norm":
        n = next((k for k in range(x.ndim + 1) if math.prod(x.shape[x.ndim - k:]) == vals[1].size), None)
        if n is None:
            raise PlanError(f"{where}: weight of {vals[1].size} elements fits no trailing dimensions of {x.shape}")
        return O.layer_norm(x, x.shape[x.ndim - n:], vals[1], vals[2], _float(node["eps"], f"{where} eps"))
    if op == "reshape":
        return O.reshape(x, shape)
    if op == "transpose":
        return O.transpose(x, _ints(node["axes"], f"{where} axes", MAX_NDIM))
    if op == "squeeze":
        return O.squeeze(x, _ints(node["axes"], f"{where} axes", MAX_NDIM))
    if op == "expand_dims":
        return O.expand_dims(x, _int(node["axis"], f"{where} axis", -64, 64))
    if op == "expand":
        return O.expand(x, shape)
    if op == "concat":
        if not all(isinstance(v, Tensor) for v in vals):
            raise PlanError(f"{where}: concat's operands are tensors")
        return O.concat(vals, _int(node["axis"], f"{where} axis", -64, 64))
    key = _key(node["key"], where)
    if _key_bound(key, x.shape) > max_elements:
        raise PlanError(f"{where}: the key selects more than {max_elements} elements")
    return x[key]


def _reduce(node: dict, x: Tensor, dtype, where: str) -> Tensor:
    """A reduction as ops._reduce makes it: its op, axes and result dtype checked against what the reduction
    builders give (sum/prod: the input's dtype or sum_dtype of it; min/max: the input's; arg*: int64)."""
    name = node["reduce"]
    if name not in REDUCTIONS:
        raise PlanError(f"{where}: unknown reduction {jsondoc.show(name)}; reductions: {', '.join(REDUCTIONS)}")
    axes = _ints(node["axes"], f"{where} axes", MAX_NDIM)
    keepdims = node["keepdims"]
    if not isinstance(keepdims, bool):
        raise PlanError(f"{where}: keepdims must be true or false, got {jsondoc.show(keepdims)}")
    divisor = _float(node["divisor"], f"{where} divisor")
    if name in ("sum", "prod"):
        allowed = {x.dtype, O.sum_dtype(x.dtype)}
    else:
        allowed = {D.int64 if name.startswith("arg") else x.dtype} if x.dtype != D.bool_ else set()
    if dtype not in allowed:
        raise PlanError(f"{where}: a {name} of {x.dtype} gives {' or '.join(sorted(map(str, allowed))) or 'nothing'}"
                        f", not {dtype}")
    if name.startswith("arg") and len(axes) != 1:
        raise PlanError(f"{where}: {name} takes one axis, got {axes}")
    if divisor != 0 and not (name == "sum" and dtype in D.FLOATS and math.isfinite(divisor) and divisor > 0):
        raise PlanError(f"{where}: a divisor (a mean's count) is a positive finite number on a floating-point sum, "
                        f"got {divisor} on a {name} of {dtype}")
    return O._reduce(name, x, axes, keepdims, dtype, divisor)


def _leaf(node: dict, where: str, leaves: Mapping, max_elements: int) -> Tensor:
    ident = _int(node["id"], f"{where} id", 0, _ID_MAX)
    shape, dtype = _shape(node["shape"], where, max_elements), _dtype(node["dtype"], where)
    try:
        t = leaves[ident]
    except KeyError:
        known = sorted(leaves)[:10]
        raise PlanError(f"{where}: no leaf tensor has id {ident}; ids: {', '.join(map(str, known)) or 'none'}"
                        + (" ..." if len(leaves) > 10 else "")) from None
    if not isinstance(t, Tensor) or t.shape != shape or t.dtype != dtype:
        raise PlanError(f"{where}: leaf {ident} is {getattr(t, 'dtype', type(t).__name__)} of shape "
                        f"{getattr(t, 'shape', None)}; the graph declares {dtype} of shape {shape}")
    return t


def _fields(obj, where: str, allowed: set, required: set) -> None:
    if not isinstance(obj, dict):
        raise PlanError(f"{where} must be an object, got {jsondoc.show(obj)}")
    extra = [k for k in obj if k not in allowed]
    missing = sorted(required - obj.keys())
    if extra or missing:
        raise PlanError(f"{where}: " + "; ".join(
            ([f"unknown field(s) {', '.join(shown(str(k)) for k in extra[:5])}"] if extra else [])
            + ([f"missing field(s) {', '.join(missing)}"] if missing else []))
            + f"; fields: {', '.join(sorted(allowed))}")


def _int(v, where: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise PlanError(f"{where} must be an integer from {lo} to {hi}, got {jsondoc.show(v)}")
    return v


def _ints(v, where: str, limit: int) -> tuple:
    if not isinstance(v, list) or len(v) > limit:
        raise PlanError(f"{where} must be a list of at most {limit} integers, got {jsondoc.show(v)}")
    return tuple(_int(a, where, -64, 64) for a in v)


def _float(v, where: str) -> float:
    """A JSON number (or 'nan', 'inf', '-inf') as a float."""
    if isinstance(v, str) and v in ("nan", "inf", "-inf"):
        return float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, int) and v.bit_length() > 1023):
        raise PlanError(f"{where} must be a number, got {jsondoc.show(v)}")
    return float(v)


def _shape(v, where: str, max_elements: int) -> tuple:
    if not isinstance(v, list) or len(v) > MAX_NDIM:
        raise PlanError(f"{where}: shape must be a list of at most {MAX_NDIM} sizes, got {jsondoc.show(v)}")
    shape = tuple(_int(d, f"{where} shape", 0, max_elements) for d in v)
    if math.prod(shape) > max_elements:
        raise PlanError(f"{where}: shape {shape} has {math.prod(shape)} elements, more than the {max_elements} "
                        "a node may have")
    return shape


def _dtype(v, where: str) -> np.dtype:
    if not isinstance(v, str) or v not in _DTYPES:
        raise PlanError(f"{where}: dtype {jsondoc.show(v)} is not one of {', '.join(_DTYPES)}")
    return _DTYPES[v]


def _scalar(v, dt: np.dtype, where: str):
    """A constant's value as the Python scalar of its dtype's kind."""
    if dt == D.bool_:
        if not isinstance(v, bool):
            raise PlanError(f"{where}: a bool constant is true or false, got {jsondoc.show(v)}")
        return v
    if dt in D.FLOATS:
        return _float(v, where)
    info = np.iinfo(dt)
    return _int(v, f"{where} ({dt} constant)", int(info.min), int(info.max))


def _key(parts, where: str) -> tuple:
    if not isinstance(parts, list) or len(parts) > MAX_NDIM:
        raise PlanError(f"{where}: key must be a list of at most {MAX_NDIM} parts, got {jsondoc.show(parts)}")
    out: list = []
    for p in parts:
        if p == "newaxis":
            out.append(None)
        elif p == "...":
            out.append(Ellipsis)
        elif isinstance(p, int) and not isinstance(p, bool):
            out.append(_int(p, f"{where} key", -_ID_MAX, _ID_MAX))
        elif isinstance(p, dict) and p.keys() == {"slice"} and isinstance(p["slice"], list) and len(p["slice"]) == 3:
            s = [None if b is None else _int(b, f"{where} slice", -_ID_MAX, _ID_MAX) for b in p["slice"]]
            if s[2] == 0:
                raise PlanError(f"{where}: a slice's step is not 0")
            out.append(slice(*s))
        elif isinstance(p, dict) and p.keys() == {"array", "shape", "dtype"} and p["dtype"] in ("int64", "bool"):
            shape = _shape(p["shape"], f"{where} key array", MAX_KEY)
            flat = p["array"]
            if not isinstance(flat, list) or len(flat) != math.prod(shape):
                raise PlanError(f"{where}: a key array of shape {shape} lists {math.prod(shape)} values")
            if p["dtype"] == "bool":
                if not all(isinstance(b, bool) for b in flat):
                    raise PlanError(f"{where}: a boolean key array holds true and false only")
                out.append(np.array(flat, dtype=np.bool_).reshape(shape))
            else:
                out.append(np.array([_int(b, f"{where} key array", -_ID_MAX, _ID_MAX) for b in flat],
                                    dtype=np.int64).reshape(shape))
        else:
            raise PlanError(f"{where}: key part {jsondoc.show(p)} is not an int, 'newaxis', '...', {{'slice': "
                            "[start, stop, step]}} or {'array', 'shape', 'dtype': 'int64' or 'bool'}")
    return tuple(out)


def _key_bound(key: tuple, shape: tuple) -> int:
    """At least as many elements as x[key] has (x of `shape`), found without indexing: the broadcast index arrays'
    elements times the dimensions they and the ints do not consume (a slice keeps at most its dimension)."""
    arrays, consumed = [], set()
    split = next((i for i, p in enumerate(key) if p is Ellipsis), len(key))
    for side, parts in ((1, key[:split]), (-1, key[split + 1:][::-1])):
        pos = 0 if side == 1 else len(shape) - 1
        for p in parts:
            if p is None:
                continue
            n = p.ndim if isinstance(p, np.ndarray) and p.dtype == np.bool_ else 1
            if not isinstance(p, slice):
                consumed.update(range(pos, pos + side * n, side))
                if isinstance(p, np.ndarray):
                    arrays.append((int(p.sum()),) if p.dtype == np.bool_ else p.shape)
            pos += side * n
    try:
        picked = math.prod(np.broadcast_shapes(*arrays)) if arrays else 1
    except ValueError:
        raise PlanError(f"getitem: the key's index arrays do not broadcast together ({arrays})") from None
    return picked * math.prod(d for i, d in enumerate(shape) if i not in consumed)


# ---- the service's side ---------------------------------------------------------------------------

def server_device() -> str:
    """Where a service computes tensors: 'gpu' when it has one, else 'cpu'. Triton's interpreter (a GPU
    simulated on the CPU, for tests) is not one: a service without a GPU computes on its CPU."""
    from eidos.tensor import storage
    from eidos.tensor.backend import get_backend

    return "gpu" if get_backend("gpu").is_available() and not storage.interpreted() else "cpu"


class _Moved(Mapping):
    """The leaves a graph reads, each moved to `device` when the graph first names it (the others stay)."""

    def __init__(self, leaves: Mapping[int, Tensor], device: str) -> None:
        self.leaves, self.device, self.moved = leaves, device, {}

    def __getitem__(self, ident: int) -> Tensor:
        t = self.moved.get(ident)
        if t is None:
            t = self.leaves[ident]
            if isinstance(t, Tensor) and t.device != self.device:
                t = t.to(self.device)
            self.moved[ident] = t
        return t

    def __iter__(self) -> Iterator[int]:
        return iter(self.leaves)

    def __len__(self) -> int:
        return len(self.leaves)


def run(doc, leaves: Mapping[int, Tensor], device: str | None = None, **limits) -> list[Tensor]:
    """A tensor graph run on this machine: decoded over `leaves` (moved to `device`, by default
    server_device()) within `limits` (decode's), realized; the realized outputs."""
    outputs = decode(doc, _Moved(leaves, device or server_device()), **limits)
    for t in outputs:
        t.realize()
    return outputs


def run_fragment(fragment: dict, session, config) -> list:
    """A "tensor" fragment run for a session (eidos.remote.jobs): {"kind": "tensor", "graph": <document>,
    "device": "gpu" | "cpu", "id": the run's id (for cancel)}. The leaves are the session's entries: buffers sent on the data channel (viewed
    as the dtype and shape the graph declares, no copy; on the gpu, copied from the pool's pinned block) or
    results of earlier runs. Each output becomes a new "array" entry that stays on the service."""
    _fields(fragment, "the tensor fragment", {"kind", "graph", "device", "id"}, {"kind", "graph"})
    want = fragment.get("device", "gpu")
    if want not in ("gpu", "cpu"):
        raise PlanError(f"the tensor fragment's device is 'gpu' or 'cpu', got {jsondoc.show(want)}")
    device = server_device() if want == "gpu" else "cpu"
    graph = jsondoc.read(fragment["graph"], error=PlanError, what="a tensor graph", max_depth=8)
    leaves, blocks = {}, []
    for ident, shape, dtype in _declared_leaves(graph):
        if ident not in leaves:
            leaves[ident] = _session_leaf(session.store.input(ident, wait=config.input_wait), shape, dtype, device,
                                          blocks)
    outputs = run(graph, leaves, device, max_bytes=getattr(config, "max_buffer", None))
    entries = []
    for t in outputs:
        data = t._data
        if device == "cpu" and any(np.may_share_memory(data, b) for b in blocks):
            data = data.copy()                  # a view of a pool block, which is freed when its buffer is released
        entries.append(session.store.put("array", _bytes(data, device), t.size * t.dtype.itemsize,
                                         shape=list(t.shape), dtype=D.NAME[t.dtype], device=device))
    return entries


def _declared_leaves(graph) -> Iterator[tuple[int, tuple, np.dtype]]:
    """(id, shape, dtype) of each leaf node of a document (checked; decode checks the rest)."""
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    if not isinstance(nodes, list) or len(nodes) > MAX_NODES:
        raise PlanError(f"the tensor graph's nodes must be a list of 1 to {MAX_NODES} nodes")
    for i, node in enumerate(nodes):
        if isinstance(node, dict) and node.get("op") == "leaf":
            _fields(node, f"node {i}", {"op", "id", "shape", "dtype"}, {"op", "id", "shape", "dtype"})
            yield (_int(node["id"], f"node {i} id", 0, _ID_MAX), _shape(node["shape"], f"node {i}", MAX_ELEMENTS),
                   _dtype(node["dtype"], f"node {i}"))


def _session_leaf(entry, shape: tuple, dtype: np.dtype, device: str, blocks: list) -> Tensor:
    """A session's entry as a tensor: a buffer viewed as `dtype` and `shape`, or an earlier result."""
    from eidos.tensor import storage

    if entry.kind == "array":
        value, meta = entry.value, entry.meta
        if meta.get("shape") != list(shape) or meta.get("dtype") != D.NAME[dtype]:
            raise PlanError(f"result {entry.id} is {meta.get('dtype')} of shape {tuple(meta.get('shape', ()))}; the "
                            f"graph reads it as {dtype} of shape {shape}")
        if meta.get("device") == "gpu":
            return Tensor(value.view(storage.torch_dtype(dtype)).reshape(shape), _device="gpu")
        return Tensor(value.view(dtype).reshape(shape))
    if entry.block is None:
        raise PlanError(f"handle {entry.id} holds a {entry.kind}; a tensor graph reads buffers and arrays")
    need = math.prod(shape) * dtype.itemsize
    if entry.nbytes != need:
        raise PlanError(f"buffer {entry.id} holds {entry.nbytes} bytes; the graph reads it as {dtype} of shape {shape}, "
                        f"{need} bytes")
    if device == "gpu" and entry.block.nbytes and getattr(entry.block, "tensor", None) is not None:
        raw = entry.block.tensor().to(storage.torch_device())   # from pinned memory: at full DMA speed
        return Tensor(raw.view(storage.torch_dtype(dtype)).reshape(shape), _device="gpu")
    a = entry.block.array(dtype, shape)
    blocks.append(a)
    return Tensor(a)


def _bytes(data, device: str):
    """A result's data as flat bytes (uint8), what the data channel sends for it and what a later graph views."""
    if device == "gpu":
        from eidos.tensor import storage

        return storage.as_bytes(data.contiguous())
    return np.ascontiguousarray(data).reshape(-1).view(np.uint8)


# ---- the client's side: the 'remote:gpu' and 'remote:cpu' tensor devices ------------------------------

class RemoteArray:
    """A remote tensor's data: a result the service keeps for connection `remote` under `handle`, released when
    no tensor holds it any more (results stay on the service until then; a later graph reads them in place)."""

    __slots__ = ("remote", "handle", "shape", "dtype", "__weakref__")

    def __init__(self, remote, handle, shape: tuple, dtype: np.dtype) -> None:
        self.remote, self.handle, self.shape, self.dtype = remote, handle, shape, dtype
        weakref.finalize(self, _release, remote, handle)

    @property
    def id(self) -> int:
        return self.handle.id


_collected: list = []   # (connection, handle) of collected remote tensors' results, not yet given back


def _release(remote, handle) -> None:
    """A remote tensor was collected: its result is given back with the next remote call (a finalizer may run
    inside any code, the client's own calls included, so it makes none)."""
    _collected.append((remote, handle))


def release_collected() -> None:
    """Give back the results of remote tensors collected so far: one release call per connection."""
    by_remote: dict[int, tuple] = {}
    while _collected:
        remote, handle = _collected.pop()
        by_remote.setdefault(id(remote), (remote, []))[1].append(handle)
    for remote, handles in by_remote.values():
        if not getattr(remote, "closed", False):   # a closed connection's session freed them all
            remote.release(*handles)


def _connection():
    import eidos.remote as remote

    conn = remote.current()
    if conn is None:
        raise BackendUnavailable("remote tensors live on an eidos service: connect to one first, "
                                 "ei.connect('eidos://host:port', token=...)")
    return conn


def _remote_tensor(remote, handle, shape: tuple, dtype: np.dtype, device: str, why: str) -> Tensor:
    t = Tensor.__new__(Tensor)
    t.shape, t.dtype, t.device, t._data, t._op, t._args, t._attrs, t._runs, t._readers = \
        shape, dtype, device, RemoteArray(remote, handle, shape, dtype), "leaf", (), None, [why], None
    return t


def _ship(remote, graph: dict, device: str) -> list:
    """The result handles of one graph run on the service's `device` ('remote:gpu' or 'remote:cpu')."""
    release_collected()
    return remote.run_subgraph({"kind": "tensor", "graph": graph, "device": device.partition(":")[2]})


def move(t: Tensor, device: str) -> Tensor:
    """t on `device`, at least one of them remote: an upload (to the current connection), a download, or a move
    between the service's devices (done there)."""
    if device[0] == "r" and t.device[0] == "r":
        realize(t)
        remote = t._data.remote
        (h,) = _ship(remote, _leaf_graph(t._data.id, t.shape, t.dtype), device)
        return _remote_tensor(remote, h, t.shape, t.dtype, device, (f"to({device!r})", "moved on the service"))
    if device[0] == "r":
        if t.dtype in D.COMPLEX:
            raise UnsupportedError(f"to({device!r}): {_COMPLEX}")
        remote = _connection()
        data = np.ascontiguousarray(t.numpy())
        buf = remote.put_buffer(data.reshape(-1).view(np.uint8), wait=False)   # the run waits for it there
        try:
            (h,) = _ship(remote, _leaf_graph(buf.id, t.shape, t.dtype), device)
        finally:
            remote.release(buf)
        return _remote_tensor(remote, h, t.shape, t.dtype, device,
                              (f"to({device!r})", f"upload to {remote.address}, {data.nbytes} bytes"))
    out = Tensor(download(realize(t)))
    return out if device == "cpu" else out.to(device)


def _leaf_graph(ident: int, shape: tuple, dtype: np.dtype) -> dict:
    return {"format": FORMAT, "version": VERSION, "outputs": [0],
            "nodes": [{"op": "leaf", "id": ident, "shape": list(shape), "dtype": D.NAME[dtype]}]}


def realize(t: Tensor) -> RemoteArray:
    """Run t's graph on the service its leaves live on; t keeps the result's handle (the data stays there)."""
    if t._data is not None:
        return t._data
    remotes: list = []

    def leaf_id(x: Tensor) -> int:
        d = x._data
        if not isinstance(d, RemoteArray):
            raise DeviceError(f"a {t.device} graph reads a {x.device} tensor of shape {x.shape}; move it there first")
        if remotes and d.remote is not remotes[0]:
            raise DeviceError(f"a {t.device} graph reads tensors of two services ({remotes[0].address} and "
                              f"{d.remote.address}); move one first")
        remotes.append(d.remote)
        return d.id

    graph = encode([t], leaf_id)
    (h,) = _ship(remotes[0], graph, t.device)
    t._data = RemoteArray(remotes[0], h, t.shape, t.dtype)
    t._args = ()
    where = getattr(h, "meta", {}).get("device", "?")
    t._runs.append(("remote graph", f"{len(graph['nodes'])} node(s) ran on {remotes[0].address}, its {where}"))
    return t._data


def download(a: RemoteArray) -> np.ndarray:
    """A remote tensor's values in host memory (read-only: the fetched bytes, not copied again)."""
    view = a.remote.fetch_result(a.handle)
    return np.frombuffer(view, dtype=np.uint8).view(a.dtype).reshape(a.shape)
