"""isa.from_json: programs from JSON, either Program.to_json() output or a JSON *kernel*.

A JSON kernel is element-wise math over buffers (docs/isa.md, "JSON kernels"):

    {"kernel": "axpy", "type": "f32", "count": 1024,
     "inputs": {"x": 1, "y": {"buffer": 2, "offset": 0}}, "outputs": {"out": 3},
     "let": [["t", {"op": "mul", "args": [2.0, "x"]}]],
     "compute": {"out": {"op": "add", "args": ["t", "y"]}}}

It becomes a per-lane grid-stride loop (element i = global_id, global_id + lane_count, ...)
of LDG, register arithmetic and STG, so it runs under any LaunchConfig.
"""

from __future__ import annotations

from eidos.errors import IsaError, did_you_mean
from eidos.jsondoc import show as _show

from . import instructions as I
from .address import Address, Label, Predicate, Register, Special, pointer
from .builder import ProgramBuilder
from .instructions import Condition
from .types import Type

BINARY = {"add": I.ADD, "sub": I.SUB, "mul": I.MUL, "div": I.DIV, "rem": I.REM, "min": I.MIN, "max": I.MAX,
          "and": I.AND, "or": I.OR, "xor": I.XOR}
SHIFTS = {"shl": I.SHL, "shr": I.SHR}
UNARY = {"neg": I.NEG, "abs": I.ABS, "not": I.NOT, "sqrt": I.SQRT, "exp": I.EXP, "log": I.LOG, "sin": I.SIN,
         "cos": I.COS, "tan": I.TAN, "tanh": I.TANH, "sigmoid": I.SIGMOID, "rcp": I.RCP, "rsqrt": I.RSQRT,
         "floor": I.FLOOR, "ceil": I.CEIL, "round": I.ROUND, "trunc": I.TRUNC, "sign": I.SIGN, "gelu": I.GELU,
         "swish": I.SWISH}
TERNARY = {"fma": (I.FMA, "a", "b", "c"), "fms": (I.FMS, "a", "b", "c"), "mad": (I.MAD, "a", "b", "c"),
           "clamp": (I.CLAMP, "src", "min", "max"), "lerp": (I.LERP, "a", "b", "t")}
COMPARE = {"eq": Condition.EQ, "ne": Condition.NE, "lt": Condition.LT, "le": Condition.LE, "gt": Condition.GT,
           "ge": Condition.GE}
OPS = sorted([*BINARY, *SHIFTS, *UNARY, *TERNARY, "relu", "where"])
U64 = Type.U64


class _Kernel:
    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.b = ProgramBuilder(metadata={"kernel": spec.get("kernel", "kernel")})
        self.next_reg = 0
        self.next_pred = 1  # p0 is the loop guard
        self.consts: dict[tuple, Register] = {}
        self.values: dict[str, Register] = {}
        ty = spec.get("type", "f32")
        if not isinstance(ty, str):
            raise IsaError(f"JSON kernel: type must be a type name such as 'f32', got {_show(ty)}")
        try:
            self.ty = Type.parse(ty)
        except ValueError as e:
            raise IsaError(f"JSON kernel: {e}") from None

    def reg(self) -> Register:
        if self.next_reg >= 256:
            raise IsaError("JSON kernel: the expressions need more than 256 registers")
        self.next_reg += 1
        return Register(self.next_reg - 1)

    def const(self, value) -> Register:
        key = (type(value), value)
        if key not in self.consts:
            self.consts[key] = r = self.reg()
            self.prologue.append(I.MOV_IMM(r, value, self.ty))
        return self.consts[key]

    def expr(self, e, where: str) -> Register:
        if isinstance(e, bool):
            raise IsaError(f"JSON kernel: {where}: booleans are not values")
        if isinstance(e, (int, float)):
            if self.ty.is_float:
                if isinstance(e, int) and abs(e) > 2**1023:
                    raise IsaError(f"JSON kernel: {where}: a {e.bit_length()}-bit integer is out of the float range")
                return self.const(float(e))
            if not isinstance(e, int) or not self.ty.min_value <= e <= self.ty.max_value:
                raise IsaError(f"JSON kernel: {where}: {_show(e)} is not a {self.ty.name} value")
            return self.const(e)
        if isinstance(e, str):
            if e not in self.values:
                hint = did_you_mean(e, self.values)
                raise IsaError(f"JSON kernel: {where}: unknown name {e!r}; names: {sorted(self.values)}"
                               + (f"; {hint}" if hint else ""))
            return self.values[e]
        if not isinstance(e, dict) or "op" not in e:
            raise IsaError(f"JSON kernel: {where}: expected a number, a name or {{\"op\": ..., \"args\": [...]}}, "
                           f"got {_show(e)}")
        if not isinstance(e["op"], str):
            raise IsaError(f"JSON kernel: {where}: an op is named by a string, got {_show(e['op'])}")
        op, args = e["op"].lower(), e.get("args", [])
        if not isinstance(args, list):
            raise IsaError(f"JSON kernel: {where}: args must be a list")
        want = {**{k: 2 for k in (*BINARY, *SHIFTS)}, **{k: 1 for k in (*UNARY, "relu")},
                **{k: 3 for k in (*TERNARY, "where")}}
        if op not in want:
            hint = did_you_mean(op, OPS)
            raise IsaError(f"JSON kernel: {where}: unknown op {op!r}" + (f"; {hint}" if hint else f"; ops: {', '.join(OPS)}"))
        if len(args) != want[op]:
            raise IsaError(f"JSON kernel: {where}: {op} takes {want[op]} argument(s), got {len(args)}")
        if op == "where":
            return self.where(args, where)
        regs = [self.expr(a, f"{where}.{op}[{k}]") for k, a in enumerate(args)]
        dst = self.reg()
        ty = self.ty
        if op in BINARY:
            self.body.append(BINARY[op](dst, regs[0], regs[1], ty))
        elif op in SHIFTS:
            self.body.append(SHIFTS[op](dst, regs[0], regs[1], ty))
        elif op in UNARY:
            self.body.append(UNARY[op](dst, regs[0], ty))
        elif op == "relu":
            self.body.append(I.MAX(dst, regs[0], self.const(0.0 if ty.is_float else 0), ty))
        else:
            cls, *names = TERNARY[op]
            self.body.append(cls(dst=dst, ty=ty, **dict(zip(names, regs))))
        return dst

    def where(self, args, where: str) -> Register:
        cond = args[0]
        if not (isinstance(cond, dict) and isinstance(cond.get("op"), str) and cond["op"].lower() in COMPARE
                and isinstance(cond.get("args"), list) and len(cond["args"]) == 2):
            raise IsaError(f"JSON kernel: {where}: where's first argument must be a comparison "
                           f"({', '.join(COMPARE)}) of two values")
        lhs, rhs = (self.expr(a, f"{where}.where.cond") for a in cond["args"])
        if self.next_pred >= 16:
            raise IsaError("JSON kernel: more than 15 comparisons")
        p = Predicate(self.next_pred)
        self.next_pred += 1
        self.body.append(I.SETcc(p, lhs, rhs, COMPARE[cond["op"].lower()], self.ty))
        t, f = self.expr(args[1], f"{where}.where[1]"), self.expr(args[2], f"{where}.where[2]")
        dst = self.reg()
        self.body.append(I.SEL(dst, p, t, f, self.ty))
        return dst

    def build(self):
        s = self.spec
        count = s.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= U64.max_value:
            raise IsaError(f"JSON kernel: count must be an integer in 0..2**64-1, got {_show(count)}")
        compute = s.get("compute")
        if not isinstance(compute, dict) or not compute:
            raise IsaError("JSON kernel: 'compute' must map output names to expressions")
        for kind in ("inputs", "outputs"):
            if not isinstance(s.get(kind, {}), dict):
                raise IsaError(f"JSON kernel: '{kind}' must map names to buffer handles, got {_show(s[kind])}")
        if not isinstance(s.get("let", []), list):
            raise IsaError(f"JSON kernel: 'let' must be a list of [name, expression], got {_show(s['let'])}")
        outputs = s.get("outputs", {})
        missing = sorted(set(compute) - set(outputs))
        if missing:
            raise IsaError(f"JSON kernel: compute names {missing} are not outputs; outputs: {sorted(outputs)}")
        i, stride, n, size, offs = self.reg(), self.reg(), self.reg(), self.reg(), self.reg()
        self.prologue = [I.MOV(i, Special.GLOBAL_ID, U64), I.MOV(stride, Special.LANE_COUNT, U64),
                         I.MOV_IMM(n, count, U64), I.MOV_IMM(size, self.ty.size_bytes, U64)]
        self.body = [I.MUL(offs, i, size, U64)]
        ptrs = {}
        for kind in ("inputs", "outputs"):
            for name, where in dict(s.get(kind, {})).items():
                if isinstance(where, dict):
                    handle, offset = where.get("buffer"), where.get("offset", 0)
                else:
                    handle, offset = where, 0
                if not (isinstance(handle, int) and isinstance(offset, int) and 1 <= handle < 2**32
                        and 0 <= offset < 2**32) or isinstance(handle, bool) or isinstance(offset, bool):
                    raise IsaError(f"JSON kernel: {kind[:-1]} {name!r} needs a buffer handle in 1..2**32-1 and an offset "
                                   f"in 0..2**32-1, got {_show(where)}")
                ptrs[(kind, name)] = p = self.reg()
                self.prologue.append(I.MOV_IMM(p, pointer(handle, offset), U64))
        for name in s.get("inputs", {}):
            a, v = self.reg(), self.reg()
            self.body += [I.ADD(a, ptrs[("inputs", name)], offs, U64), I.LDG(v, Address.register(a), self.ty)]
            self.values[name] = v
        for k, item in enumerate(s.get("let", [])):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                raise IsaError(f"JSON kernel: let[{k}] must be [name, expression]")
            self.values[item[0]] = self.expr(item[1], f"let[{k}] {item[0]}")
        for name, e in compute.items():
            v = self.expr(e, f"compute.{name}")
            a = self.reg()
            self.body += [I.ADD(a, ptrs[("outputs", name)], offs, U64), I.STG(Address.register(a), v, self.ty)]
        b = self.b
        b.add(*self.prologue)
        top, done = b.label("loop"), Label("done")
        b.add(I.SETcc(Predicate(0), i, n, Condition.GE, U64), I.BRA(done, Predicate(0)))
        b.add(*self.body, I.ADD(i, i, stride, U64), I.BRA(top))
        b.label(done)
        b.add(I.EXIT())
        return b.build()


def kernel(spec: dict):
    """A Program from a JSON kernel object."""
    return _Kernel(spec).build()


def from_json(obj_or_text):
    from .serialize import FORMAT, from_dict, load

    obj = load(obj_or_text)
    if obj.get("format") == FORMAT:
        return from_dict(obj)
    if "compute" in obj:
        return kernel(obj)
    raise IsaError(f"JSON is neither an ISA program (format {FORMAT!r}) nor a JSON kernel (with 'compute')")
