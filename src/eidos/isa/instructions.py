"""Every Atlas ISA instruction, as a frozen dataclass with the hologram-backends field names.

Conventions (the contract every backend follows; docs/isa.md gives the semantics):
- register operands are Register, predicates Predicate, branch targets Label, memory operands
  Address, element types `ty: Type` (CVT has src_ty and dst_ty);
- each class carries its group, whether it is *collective* (grid-wide: runs once per launch
  when every live lane has reached it, see docs/isa.md), which types it takes ("any",
  "float", "int", or None when it has no ty), and which operand fields it writes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import ClassVar

from .address import Address, Label, Predicate, Register, Space, Special
from .types import Type


class Condition(enum.Enum):
    """SETcc comparisons. On floats every comparison with NaN is false except NE."""

    EQ = "EQ"
    NE = "NE"
    LT = "LT"
    LE = "LE"
    GT = "GT"
    GE = "GE"


class MemoryScope(enum.Enum):
    BLOCK = "Block"
    DEVICE = "Device"
    SYSTEM = "System"


class MapOperation(enum.Enum):
    Abs = "Abs"
    Neg = "Neg"
    Sqrt = "Sqrt"
    Exp = "Exp"
    Log = "Log"
    Sin = "Sin"
    Cos = "Cos"
    Tan = "Tan"
    Relu = "Relu"
    Sigmoid = "Sigmoid"
    Tanh = "Tanh"


class BinaryMapOperation(enum.Enum):
    Add = "Add"
    Sub = "Sub"
    Mul = "Mul"
    Div = "Div"
    Pow = "Pow"
    Min = "Min"
    Max = "Max"
    Atan2 = "Atan2"


class ReduceOperation(enum.Enum):
    Sum = "Sum"
    Product = "Product"
    Min = "Min"
    Max = "Max"


# Map operations that only make sense on floats (the rest also take integers).
FLOAT_ONLY_MAPS = frozenset({MapOperation.Sqrt, MapOperation.Exp, MapOperation.Log, MapOperation.Sin,
                             MapOperation.Cos, MapOperation.Tan, MapOperation.Sigmoid, MapOperation.Tanh})
FLOAT_ONLY_BINARY_MAPS = frozenset({BinaryMapOperation.Pow, BinaryMapOperation.Atan2})


class Instruction:
    """Base of all instructions; the class attributes describe it as data."""

    __slots__ = ()
    group: ClassVar[str] = ""
    collective: ClassVar[bool] = False
    types: ClassVar[str | None] = None
    writes: ClassVar[tuple[str, ...]] = ()

    @property
    def name(self) -> str:
        return type(self).__name__

    def operands(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def registers_written(self) -> list[Register | Predicate]:
        return [getattr(self, n) for n in self.writes]

    def registers_read(self) -> list[Register | Predicate]:
        """Every register or predicate this instruction reads, address registers included."""
        out: list[Register | Predicate] = []
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, (Register, Predicate)) and (f.name not in self.writes or f.name in self.reads_too):
                out.append(v)
            elif isinstance(v, Address) and v.space is Space.REGISTER:
                out.append(v.reg)
            elif isinstance(v, tuple):
                for item in v:
                    if isinstance(item, MapStep):
                        for a in (item.dst, item.a, item.b):
                            if isinstance(a, Register):
                                out.append(a)
                            elif a is not None and a.space is Space.REGISTER:
                                out.append(a.reg)
        return out

    reads_too: ClassVar[tuple[str, ...]] = ()

    def addresses(self) -> list[tuple[str, Address]]:
        out = []
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Address):
                out.append((f.name, v))
            elif isinstance(v, tuple):
                for i, item in enumerate(v):
                    if isinstance(item, MapStep):
                        out += [(f"{f.name}[{i}].{n}", a) for n, a in
                                (("dst", item.dst), ("a", item.a), ("b", item.b)) if isinstance(a, Address)]
        return out


INSTRUCTIONS: dict[str, type[Instruction]] = {}


def _instruction(group: str, *, types: str | None = "any", writes: tuple[str, ...] = ("dst",),
                 collective: bool = False, reads_too: tuple[str, ...] = ()):
    def wrap(cls):
        cls = dataclass(frozen=True, slots=True)(cls)
        cls.group, cls.types, cls.writes, cls.collective, cls.reads_too = group, types, writes, collective, reads_too
        INSTRUCTIONS[cls.__name__] = cls
        return cls
    return wrap


def _register_op(name: str, group: str, operands: str, doc: str, *, types: str = "any",
                 writes: tuple[str, ...] = ("dst",), collective: bool = False, ty_default: Type | None = None):
    """Define an instruction whose operands are registers (named in `operands`) plus `ty`.

    Fields named src_array are Addresses and count an int, so the reductions fit too.
    """
    kinds = {"src_array": "Address", "count": "int"}
    ns = {"__doc__": doc, "__module__": __name__, "__qualname__": name,
          "__annotations__": {**{n: kinds.get(n, "Register") for n in operands.split()}, "ty": "Type"}}
    if ty_default is not None:
        ns["ty"] = field(default=ty_default)
    return _instruction(group, types=types, writes=writes, collective=collective)(type(name, (Instruction,), ns))


# ---- data movement -------------------------------------------------------------------------

@_instruction("data")
class LDG(Instruction):
    """dst <- global memory[src] (buffer, pool, class or register-held pointer)."""
    dst: Register
    src: Address
    ty: Type


@_instruction("data", writes=())
class STG(Instruction):
    """global memory[dst] <- src."""
    dst: Address
    src: Register
    ty: Type


@_instruction("data")
class LDS(Instruction):
    """dst <- the block's shared memory[src] (Address.shared or a register-held offset)."""
    dst: Register
    src: Address
    ty: Type


@_instruction("data", writes=())
class STS(Instruction):
    dst: Address
    src: Register
    ty: Type


@_instruction("data")
class MOV(Instruction):
    """dst <- src; src may be a Special (the lane's ids and launch sizes; integer ty only)."""
    dst: Register
    src: Register | Special
    ty: Type


@_instruction("data")
class MOV_IMM(Instruction):
    dst: Register
    value: int | float
    ty: Type


@_instruction("data", types=None)
class CVT(Instruction):
    """dst <- src converted from src_ty to dst_ty (floats to ints truncate and saturate, NaN -> 0)."""
    dst: Register
    src: Register
    src_ty: Type
    dst_ty: Type


# ---- arithmetic --------------------------------------------------------------------------

ADD = _register_op("ADD", "arithmetic", "dst lhs rhs", "dst <- lhs + rhs")
SUB = _register_op("SUB", "arithmetic", "dst lhs rhs", "dst <- lhs - rhs")
MUL = _register_op("MUL", "arithmetic", "dst lhs rhs", "dst <- lhs * rhs")
DIV = _register_op("DIV", "arithmetic", "dst lhs rhs",
                   "Integers truncate toward zero; x/0 gives all ones (-1 signed), MIN/-1 gives MIN.")
REM = _register_op("REM", "arithmetic", "dst lhs rhs",
                   "Sign of the dividend (C fmod / truncated remainder); x rem 0 gives x.")
MAD = _register_op("MAD", "arithmetic", "dst a b c",
                   "dst <- a * b + c, rounded (or wrapped) after the multiply and again after the add.")
FMA = _register_op("FMA", "arithmetic", "dst a b c", "dst <- a * b + c with one rounding (floats); wraps once (integers).")
MIN = _register_op("MIN", "arithmetic", "dst lhs rhs", "NaN if either is NaN; -0.0 is below +0.0.")
MAX = _register_op("MAX", "arithmetic", "dst lhs rhs", "NaN if either is NaN; -0.0 is below +0.0.")
ABS = _register_op("ABS", "arithmetic", "dst src", "dst <- |src| (integers wrap: ABS(MIN) = MIN)")
NEG = _register_op("NEG", "arithmetic", "dst src", "dst <- -src (integers wrap)")


# ---- logic and shifts ----------------------------------------------------------------------

AND = _register_op("AND", "logic", "dst lhs rhs", "bitwise and", types="int")
OR = _register_op("OR", "logic", "dst lhs rhs", "bitwise or", types="int")
XOR = _register_op("XOR", "logic", "dst lhs rhs", "bitwise exclusive or", types="int")
NOT = _register_op("NOT", "logic", "dst src", "bitwise not", types="int")
SHL = _register_op("SHL", "logic", "dst src amount", "dst <- src << (amount mod bits), wrapped.", types="int")
SHR = _register_op("SHR", "logic", "dst src amount",
                   "Arithmetic shift for signed types, logical for unsigned; amount taken mod bits.", types="int")


@_instruction("logic", writes=("pred",))
class SETcc(Instruction):
    """pred <- lhs <cond> rhs."""
    pred: Predicate
    lhs: Register
    rhs: Register
    cond: Condition
    ty: Type


@_instruction("logic")
class SEL(Instruction):
    """dst <- true_val if pred else false_val."""
    dst: Register
    pred: Predicate
    true_val: Register
    false_val: Register
    ty: Type


# ---- control flow ----------------------------------------------------------------------------

@_instruction("control", types=None, writes=())
class BRA(Instruction):
    """Jump to target; with pred, only when the predicate is true."""
    target: Label
    pred: Predicate | None = None


@_instruction("control", types=None, writes=())
class CALL(Instruction):
    """Push the return position on the lane's call stack and jump to target."""
    target: Label


@_instruction("control", types=None, writes=())
class RET(Instruction):
    """Pop the call stack and jump there; with an empty stack the lane exits."""


@_instruction("control", types=None, writes=("counter",), reads_too=("counter",))
class LOOP(Instruction):
    """The back edge of a counted loop: counter += 1; if counter < iterations: jump to target.

    `MOV_IMM counter, 0; @body ...; LOOP counter, n, @body` runs the body n times (at least once).
    The counter is an I64 register.
    """
    counter: Register
    iterations: int
    target: Label


@_instruction("control", types=None, writes=())
class EXIT(Instruction):
    """The lane stops. Falling off the end of the program does the same."""


# ---- synchronization -----------------------------------------------------------------------

@_instruction("sync", types=None, writes=())
class BarSync(Instruction):
    """Wait until every live lane of the block reaches a BarSync with the same id."""
    id: int = 0


@_instruction("sync", types=None, writes=())
class MemFence(Instruction):
    """Order this lane's memory accesses at the scope (a no-op on sequentially consistent backends)."""
    scope: MemoryScope = MemoryScope.DEVICE


# ---- Atlas-specific -------------------------------------------------------------------------

ClsGet = _register_op("ClsGet", "atlas", "dst src", "dst <- the class holding class-memory address src: (src mod 1,179,648) // 12,288.",
                      types="int", ty_default=Type.U32)


MIRROR = _register_op("MIRROR", "atlas", "dst src", "dst <- mirror(src mod 96) = (src mod 96) XOR 7, the fixed-point-free mirror involution.",
                      types="int", ty_default=Type.U32)


@_instruction("atlas", types="int", writes=("pred",))
class UnityTest(Instruction):
    """pred <- (src mod 96) is in the unity pair {0, 7} = {0, mirror(0)}."""
    pred: Predicate
    src: Register
    ty: Type = Type.U32


@_instruction("atlas")
class NBRLoad(Instruction):
    """dst <- class memory at the neighbour `offset` elements along src's 256-byte page row (torus wrap)."""
    dst: Register
    src: Register
    offset: int
    ty: Type = Type.U32


@_instruction("atlas", writes=())
class NBRStore(Instruction):
    """class memory at the neighbour `offset` elements along dst's page row <- src."""
    dst: Register
    src: Register
    offset: int
    ty: Type = Type.U32


@_instruction("atlas")
class ResAccum(Instruction):
    """Atomically: accumulator[class_id] += src (F64); dst <- the accumulator after this add."""
    dst: Register
    src: Register
    class_id: int
    ty: Type = Type.F32


@_instruction("atlas", types="int")
class PhaseRead(Instruction):
    """dst <- phase[class_id], an integer in 0..767."""
    dst: Register
    class_id: int
    ty: Type = Type.U32


@_instruction("atlas", types="int", writes=())
class PhaseWrite(Instruction):
    """phase[class_id] <- src mod 768."""
    src: Register
    class_id: int
    ty: Type = Type.U32


BoundMap = _register_op("BoundMap", "atlas", "dst src", "dst <- src mod 1,179,648 (Euclidean): any class-space coordinate folded onto the torus.",
                        types="int", ty_default=Type.U32)


# ---- reductions (collective; every lane receives the result) -------------------------------

def _reduction(name: str, doc: str):
    return _register_op(name, "reduction", "dst src_array count", doc, collective=True, ty_default=Type.F32)


ReduceAdd = _reduction("ReduceAdd", "dst <- src_array[0] + ... + src_array[count-1] in every lane")
ReduceMin = _reduction("ReduceMin", "dst <- the least of src_array[0:count] in every lane")
ReduceMax = _reduction("ReduceMax", "dst <- the greatest of src_array[0:count] in every lane")
ReduceMul = _reduction("ReduceMul", "dst <- the product of src_array[0:count] in every lane")


# ---- transcendentals ------------------------------------------------------------------------

EXP = _register_op("EXP", "transcendental", "dst src", "dst <- e ** src", types="float")
LOG = _register_op("LOG", "transcendental", "dst src", "dst <- ln(src); ln(0) = -inf, ln(<0) = NaN", types="float")
SQRT = _register_op("SQRT", "transcendental", "dst src", "dst <- sqrt(src); sqrt(<0) = NaN", types="float")
SIN = _register_op("SIN", "transcendental", "dst src", "dst <- sin(src)", types="float")
COS = _register_op("COS", "transcendental", "dst src", "dst <- cos(src)", types="float")
TAN = _register_op("TAN", "transcendental", "dst src", "dst <- tan(src)", types="float")
TANH = _register_op("TANH", "transcendental", "dst src", "dst <- tanh(src)", types="float")
SIGMOID = _register_op("SIGMOID", "transcendental", "dst src", "dst <- 1 / (1 + e ** -src)", types="float")


# ---- pool storage ----------------------------------------------------------------------------

@_instruction("pool", types=None, writes=(), collective=True)
class PoolAlloc(Instruction):
    """Once per launch: allocate a zeroed pool of `size` bytes under handle `handle` (must be free)."""
    handle: int
    size: int


@_instruction("pool", types=None, writes=(), collective=True)
class PoolFree(Instruction):
    handle: int


@_instruction("pool")
class PoolLoad(Instruction):
    dst: Register
    pool: int
    offset: int
    ty: Type


@_instruction("pool", writes=())
class PoolStore(Instruction):
    pool: int
    offset: int
    src: Register
    ty: Type


# ---- higher-order array instructions (collective) -------------------------------------------

@_instruction("parallel", writes=(), collective=True)
class ParallelMap(Instruction):
    """dst_array[i] <- operation(src_array[i]) for i < count."""
    dst_array: Address
    src_array: Address
    count: int
    operation: MapOperation
    ty: Type = Type.F32


@_instruction("parallel", writes=(), collective=True)
class ParallelMapBinary(Instruction):
    """dst_array[i] <- operation(src_a[i], src_b[i]) for i < count. Either source may be a Register: a
    scalar operand, R[reg] as a ty value for every i (the same in every live lane)."""
    dst_array: Address
    src_a: Address | Register
    src_b: Address | Register
    count: int
    operation: BinaryMapOperation
    ty: Type = Type.F32


@_instruction("parallel", collective=True)
class ParallelReduce(Instruction):
    """dst <- reduce(operation, src_array[0:count]) in every lane."""
    dst: Register
    src_array: Address
    count: int
    operation: ReduceOperation
    ty: Type = Type.F32


@dataclass(frozen=True, slots=True)
class MapStep:
    """One step of a FusedMap: dst[i] <- operation(a[i]) or operation(a[i], b[i]); a or b may be a
    Register (a scalar operand, as in ParallelMapBinary)."""
    dst: Address
    operation: MapOperation | BinaryMapOperation
    a: Address | Register
    b: Address | Register | None = None


@_instruction("parallel", writes=(), collective=True)
class FusedMap(Instruction):
    """The optimizer's fusion of consecutive ParallelMap/ParallelMapBinary: one pass over i < count,
    running every step in order for element i before element i + 1. Only built where that equals
    running the steps one after another (every pair of ranges is identical or disjoint)."""
    count: int
    steps: tuple[MapStep, ...]
    ty: Type = Type.F32


# ---- simple extensions (per lane) -----------------------------------------------------------

FMS = _register_op("FMS", "extension", "dst a b c", "dst <- a * b - c with one rounding.")
RCP = _register_op("RCP", "extension", "dst src", "dst <- 1 / src", types="float")
RSQRT = _register_op("RSQRT", "extension", "dst src", "dst <- 1 / sqrt(src)", types="float")
SIGN = _register_op("SIGN", "extension", "dst src", "dst <- -1, 0 or 1 by the sign of src (NaN stays NaN; -0.0 gives 0)", types="any")
FLOOR = _register_op("FLOOR", "extension", "dst src", "dst <- floor(src)", types="float")
CEIL = _register_op("CEIL", "extension", "dst src", "dst <- ceil(src)", types="float")
ROUND = _register_op("ROUND", "extension", "dst src", "dst <- src rounded to nearest, ties to even", types="float")
TRUNC = _register_op("TRUNC", "extension", "dst src", "dst <- src rounded toward zero", types="float")
GELU = _register_op("GELU", "extension", "dst src", "dst <- src * (1 + erf(src / sqrt(2))) / 2 (the exact, erf form)", types="float")
SWISH = _register_op("SWISH", "extension", "dst src", "dst <- src * sigmoid(src)", types="float")


@_instruction("extension")
class CLAMP(Instruction):
    """dst <- min(max(src, min), max)."""
    dst: Register
    src: Register
    min: Register
    max: Register
    ty: Type


@_instruction("extension", types="float")
class LERP(Instruction):
    """dst <- a + (b - a) * t, each step rounded."""
    dst: Register
    a: Register
    b: Register
    t: Register
    ty: Type


# ---- complex and advanced extensions (collective array instructions, row-major) -----------

def _array(name: str, doc: str, spec: dict[str, str], defaults: dict[str, object] | None = None,
           types: str = "float"):
    ns = {"__doc__": doc, "__annotations__": dict(spec), "__module__": __name__, "__qualname__": name}
    for k, v in (defaults or {}).items():
        ns[k] = field(default=v)
    cls = type(name, (Instruction,), ns)
    return _instruction("extension", types=types, writes=(), collective=True)(cls)


A, N = "Address", "int"
GEMM = _array("GEMM", "c[m,n] <- alpha * a[m,k] @ b[k,n] + beta * c[m,n]",
              {"c": A, "a": A, "b": A, "m": N, "n": N, "k": N, "alpha": "float", "beta": "float", "ty": "Type"},
              {"alpha": 1.0, "beta": 0.0, "ty": Type.F32})
BatchedGEMM = _array("BatchedGEMM", "c[i] <- a[i] @ b[i] for i < batch; a[batch,m,k], b[batch,k,n], c[batch,m,n]",
                     {"c": A, "a": A, "b": A, "batch": N, "m": N, "n": N, "k": N, "ty": "Type"}, {"ty": Type.F32})
Conv2D = _array("Conv2D", "output[b,o,y,x] <- sum over c,i,j of input[b,c,y*sh+i-ph,x*sw+j-pw] * kernel[o,c,i,j] (NCHW, zero padding)",
                {"output": A, "input": A, "kernel": A, "batch": N, "in_channels": N, "out_channels": N,
                 "height": N, "width": N, "kernel_h": N, "kernel_w": N, "stride": "tuple[int, int]",
                 "padding": "tuple[int, int]", "ty": "Type"}, {"stride": (1, 1), "padding": (0, 0), "ty": Type.F32})
LayerNorm = _array("LayerNorm", "each of `rows` rows of n: (x - mean) / sqrt(var + eps) * gamma + beta (biased variance)",
                   {"output": A, "input": A, "gamma": A, "beta": A, "n": N, "eps": "float", "rows": N, "ty": "Type"},
                   {"eps": 1e-5, "rows": 1, "ty": Type.F32})
BatchNorm = _array("BatchNorm", "inference form on [batch,channels,spatial]: (x - mean[c]) / sqrt(variance[c] + eps) * gamma[c] + beta[c]",
                   {"output": A, "input": A, "gamma": A, "beta": A, "mean": A, "variance": A, "batch": N,
                    "channels": N, "spatial": N, "eps": "float", "ty": "Type"}, {"eps": 1e-5, "ty": Type.F32})
Softmax = _array("Softmax", "each of `rows` rows of n: exp(x - max) / sum(exp(x - max))",
                 {"output": A, "input": A, "n": N, "rows": N, "ty": "Type"}, {"rows": 1, "ty": Type.F32})
Attention = _array("Attention", "softmax(q @ k^T / sqrt(head_dim)) @ v on [batch,heads,seq_len,head_dim]",
                   {"output": A, "query": A, "key": A, "value": A, "batch": N, "heads": N, "seq_len": N,
                    "head_dim": N, "ty": "Type"}, {"ty": Type.F32})
FFT = _array("FFT", "n complex points, interleaved (re, im) of ty; forward e^{-2 pi i jk/n}, inverse scales by 1/n",
             {"output": A, "input": A, "n": N, "inverse": "bool", "ty": "Type"}, {"inverse": False, "ty": Type.F32})
SparseGEMM = _array("SparseGEMM", "c[m,n] <- A @ b[k,n], A[m,k] in CSR: a_values (ty), a_indices and a_ptr (I32)",
                    {"c": A, "a_values": A, "a_indices": A, "a_ptr": A, "b": A, "m": N, "n": N, "k": N, "ty": "Type"},
                    {"ty": Type.F32})
TensorContract = _array("TensorContract", "output <- tensordot(a, b, axes=contract_dims) (row-major shapes)",
                        {"output": A, "a": A, "b": A, "shape_a": "tuple[int, ...]", "shape_b": "tuple[int, ...]",
                         "contract_dims": "tuple[tuple[int, int], ...]", "ty": "Type"}, {"ty": Type.F32})
QuantizedGEMM = _array("QuantizedGEMM", "c (I8) <- saturate(round_half_even((a @ b in I32) * a_scale * b_scale / c_scale)); a, b I8",
                       {"c": A, "a": A, "b": A, "a_scale": "float", "b_scale": "float", "c_scale": "float",
                        "m": N, "n": N, "k": N}, types=None)
MixedPrecisionGEMM = _array("MixedPrecisionGEMM", "c (F32) <- a (F16) @ b (F16) accumulated in F32 or wider",
                            {"c": A, "a": A, "b": A, "m": N, "n": N, "k": N}, types=None)
FlashAttention = _array("FlashAttention", "Attention computed block by block (block_size keys at a time); same result within tolerance",
                        {"output": A, "query": A, "key": A, "value": A, "batch": N, "heads": N, "seq_len": N,
                         "head_dim": N, "block_size": N, "ty": "Type"}, {"ty": Type.F32})
GroupNorm = _array("GroupNorm", "on [batch,channels,spatial]: normalize each group of channels/groups channels, then * gamma[c] + beta[c]",
                   {"output": A, "input": A, "gamma": A, "beta": A, "batch": N, "channels": N, "groups": N,
                    "spatial": N, "eps": "float", "ty": "Type"}, {"eps": 1e-5, "ty": Type.F32})
LayerScale = _array("LayerScale", "output[i] <- input[i] * scale[i] for i < n",
                    {"output": A, "input": A, "scale": A, "n": N, "ty": "Type"}, {"ty": Type.F32})
RoPE = _array("RoPE", "input [batch,seq_len,heads,head_dim]; pairs (x[2j], x[2j+1]) rotated by angle freqs[s, j] ([seq_len, head_dim/2])",
              {"output": A, "input": A, "freqs": A, "batch": N, "seq_len": N, "heads": N, "head_dim": N, "ty": "Type"},
              {"ty": Type.F32})
KVCacheUpdate = _array("KVCacheUpdate", "cache [max_seq,batch,heads,head_dim]: cache[position] <- new_kv [batch,heads,head_dim]",
                       {"cache": A, "new_kv": A, "position": N, "batch": N, "heads": N, "head_dim": N, "ty": "Type"},
                       {"ty": Type.F32}, types="any")
AllReduce = _array("AllReduce", "buffer[0:n] <- the reduction of every device's buffer[0:n], on each device of `devices` "
                   "(every device of the group when empty); UnsupportedError on a backend in no device group",
                   {"buffer": A, "n": N, "operation": "ReduceOperation", "devices": "tuple[int, ...]", "ty": "Type"},
                   {"devices": (), "ty": Type.F32}, types="any")
AllGather = _array("AllGather", "output[i*n:(i+1)*n] <- input[0:n] of the i-th device of `devices`, on each of them "
                   "(every device of the group when empty); UnsupportedError on a backend in no device group",
                   {"output": A, "input": A, "n": N, "devices": "tuple[int, ...]", "ty": "Type"},
                   {"devices": (), "ty": Type.F32}, types="any")
Broadcast = _array("Broadcast", "buffer[0:n] <- buffer[0:n] of device `root`, on each device of `devices` (every device "
                   "of the group when empty); UnsupportedError on a backend in no device group",
                   {"buffer": A, "n": N, "root": N, "devices": "tuple[int, ...]", "ty": "Type"},
                   {"root": 0, "devices": (), "ty": Type.F32}, types="any")
ReduceScatter = _array("ReduceScatter", "output[0:n] of the i-th device of `devices` <- the reduction of every device's "
                       "input[i*n:(i+1)*n] (every device of the group when empty); UnsupportedError on a backend in "
                       "no device group",
                       {"output": A, "input": A, "n": N, "operation": "ReduceOperation", "devices": "tuple[int, ...]",
                        "ty": "Type"}, {"devices": (), "ty": Type.F32}, types="any")
COMMUNICATING = (AllReduce, AllGather, Broadcast, ReduceScatter)   # the instructions that run across devices
del A, N

ARRAY_INSTRUCTIONS = tuple(c for c in INSTRUCTIONS.values() if c.collective)
BRANCHES = (BRA, CALL, LOOP)

__all__ = [*INSTRUCTIONS, "Instruction", "MapStep", "Condition", "MemoryScope", "MapOperation",
           "BinaryMapOperation", "ReduceOperation"]
