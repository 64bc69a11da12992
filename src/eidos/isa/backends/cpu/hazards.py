"""May a launch run its lanes (or blocks) in parallel and still equal the reference's lane order?

Yes when no lane can touch bytes another lane stores. Addresses are followed as affine forms
  const + sum(coef * initial register) + sum(coef * launch constant) + stride * global_id
for registers written once, in the program's straight-line prefix (before any label or branch;
barriers and collectives do not end it),
so every later read sees that one value. At launch the initial registers are known, so each
access becomes (handle, first byte, stride, size) and pairs of accesses are checked exactly.
Anything not of that form (a store through a loop-carried pointer, ResAccum, PhaseWrite, a
class-memory neighbour store) keeps the launch in lane order.
"""

from __future__ import annotations

from ... import instructions as I
from ...address import CLASS_BYTES, POINTER_SHIFT, Register, Space, Special

_UNIFORM = {Special.LANE_COUNT, Special.BLOCK_THREADS, Special.BLOCK_DIM_X, Special.BLOCK_DIM_Y,
            Special.BLOCK_DIM_Z, Special.GRID_DIM_X, Special.GRID_DIM_Y, Special.GRID_DIM_Z}
_LOW = (1 << POINTER_SHIFT) - 1
_CONTROL = (I.BRA, I.CALL, I.RET, I.LOOP, I.EXIT)  # a barrier or a collective does not branch


def _add(a, b, sign=1):
    if a is None or b is None:
        return None
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return out


def _scale(a, c):
    return None if a is None else {k: v * c for k, v in a.items()}


def _const(a):
    if a is not None and set(a) <= {"1"}:
        return a.get("1", 0)
    return None


class Accesses:
    """The program's memory accesses, each (kind 'load'/'store', space, handle, form or offset, size, why)."""

    def __init__(self, program) -> None:
        ins = program.instructions
        writes: dict[int, int] = {}
        for x in ins:
            for r in x.registers_written():
                if isinstance(r, Register):
                    writes[r.index] = writes.get(r.index, 0) + 1
        prefix = len(ins)
        for pos in program.labels.values():
            prefix = min(prefix, pos)
        for i, x in enumerate(ins):
            if isinstance(x, _CONTROL):
                prefix = min(prefix, i)
                break
        if program.entry != 0:
            prefix = 0
        forms: dict[int, dict | None] = {}
        read_early: set[int] = set()

        def form(r: Register):
            if r.index in forms:
                return forms[r.index]
            if writes.get(r.index, 0) == 0:
                return {("r", r.index): 1}
            return None

        for i in range(prefix):
            x = ins[i]
            for r in x.registers_read():
                if isinstance(r, Register) and writes.get(r.index, 0) and r.index not in forms:
                    read_early.add(r.index)
            written = [r for r in x.registers_written() if isinstance(r, Register)]
            if len(written) != 1 or writes.get(written[0].index) != 1 or written[0].index in read_early:
                continue
            f = None
            ty = getattr(x, "ty", None)
            if isinstance(x, I.MOV):
                if isinstance(x.src, Special):
                    f = {"gid": 1} if x.src is Special.GLOBAL_ID else ({("s", x.src): 1} if x.src in _UNIFORM else None)
                else:
                    f = form(x.src)
            elif isinstance(x, I.MOV_IMM) and ty.is_integer:
                f = {"1": int(x.value)}
            elif isinstance(x, I.CVT) and x.src_ty.is_integer and x.dst_ty.is_integer:
                f = form(x.src)
            elif ty is not None and getattr(ty, "is_integer", False):
                if isinstance(x, I.ADD):
                    f = _add(form(x.lhs), form(x.rhs))
                elif isinstance(x, I.SUB):
                    f = _add(form(x.lhs), form(x.rhs), -1)
                elif isinstance(x, I.MUL):
                    a, b = form(x.lhs), form(x.rhs)
                    ca, cb = _const(a), _const(b)
                    f = _scale(b, ca) if ca is not None else (_scale(a, cb) if cb is not None else None)
                elif isinstance(x, I.SHL):
                    c = _const(form(x.amount))
                    f = _scale(form(x.src), 1 << (c % ty.bits)) if c is not None else None
            forms[written[0].index] = f
        self.unsafe: str | None = None
        self.list: list[tuple] = []
        for i, x in enumerate(ins):
            if isinstance(x, (I.ResAccum, I.PhaseWrite)):
                self.unsafe = self.unsafe or f"instruction {i} ({x.name}) updates state every lane shares"
            elif isinstance(x, I.NBRStore):
                self.unsafe = self.unsafe or f"instruction {i} (NBRStore) stores at a run-time class-memory address"
            elif isinstance(x, (I.LDG, I.STG, I.PoolLoad, I.PoolStore, I.NBRLoad)):
                kind = "store" if isinstance(x, (I.STG, I.PoolStore)) else "load"
                size = x.ty.size_bytes
                if isinstance(x, (I.PoolLoad, I.PoolStore)):
                    self.list.append((kind, Space.POOL, x.pool, {"1": x.offset}, size, i))
                    continue
                if isinstance(x, I.NBRLoad):
                    self.list.append((kind, None, 0, None, size, i))
                    continue
                a = x.src if kind == "load" else x.dst
                if a.space is Space.REGISTER:
                    self.list.append((kind, Space.REGISTER, 0, form(a.reg), size, i))
                else:
                    h = 0 if a.space is Space.CLASS else a.handle
                    off = a.class_id * CLASS_BYTES + a.offset if a.space is Space.CLASS else a.offset
                    self.list.append((kind, a.space, h, {"1": off}, size, i))
        self.has_stores = any(k == "store" for k, *_ in self.list)

    def check(self, registers: dict, config) -> str | None:
        """None when lanes may run in parallel for this launch, else the reason they may not."""
        if self.unsafe:
            return self.unsafe
        if not self.has_stores:
            return None
        n = config.total_threads()
        env = {("s", s): v for s, v in _launch_values(config).items()}
        concrete = []
        for kind, space, h, f, size, i in self.list:
            if f is None:
                return f"instruction {i}: the address is not an affine function of the lane id"
            base, stride = 0, 0
            for k, c in f.items():
                if k == "1":
                    base += c
                elif k == "gid":
                    stride += c
                elif k[0] == "r":
                    v = registers.get(k[1], 0)
                    if not isinstance(v, int):
                        return f"instruction {i}: the address register holds {v!r}"
                    base += c * v
                else:
                    base += c * env[k]
            if space is Space.REGISTER:
                if base < 0:
                    return f"instruction {i}: negative pointer"
                h, base = base >> POINTER_SHIFT, base & _LOW
                last = base + stride * (n - 1)
                if not (0 <= last <= _LOW):
                    return f"instruction {i}: the lanes' addresses leave one allocation"
            concrete.append((kind, h, base, stride, size, i))
        for a in concrete:
            if a[0] != "store":
                continue
            if abs(a[3]) < a[4] and n > 1:
                return f"instruction {a[5]}: lanes store to overlapping bytes (stride {a[3]}, {a[4]} bytes)"
            for b in concrete:
                if b is not a and b[1] == a[1] and _conflict(a, b, n):
                    return f"instructions {a[5]} and {b[5]}: one lane may touch bytes another lane stores"
        return None


def _launch_values(config) -> dict:
    (gx, gy, gz), (bx, by, bz) = config.grid, config.block
    return {Special.LANE_COUNT: config.total_threads(), Special.BLOCK_THREADS: bx * by * bz,
            Special.BLOCK_DIM_X: bx, Special.BLOCK_DIM_Y: by, Special.BLOCK_DIM_Z: bz,
            Special.GRID_DIM_X: gx, Special.GRID_DIM_Y: gy, Special.GRID_DIM_Z: gz}


def _conflict(a, b, n: int) -> bool:
    """Whether lane i's access a and lane j != i's access b can share a byte."""
    _, _, oa, sa, za, _ = a
    _, _, ob, sb, zb, _ = b
    if sa == sb and sa != 0:
        # bytes meet when s*k lies strictly inside (ob - oa - za, ob - oa + zb), k = i - j != 0
        d = ob - oa
        lo, hi = d - za, d + zb
        s = sa
        if s < 0:
            s, lo, hi = -s, -hi, -lo
        k_lo = lo // s + 1
        k_hi = -((-hi) // s) - 1
        k_lo, k_hi = max(k_lo, -(n - 1)), min(k_hi, n - 1)
        return any(k != 0 for k in range(k_lo, k_hi + 1)) if k_hi - k_lo < 4 else True
    span_a = sorted((oa, oa + sa * (n - 1)))
    span_b = sorted((ob, ob + sb * (n - 1)))
    return span_a[0] < span_b[1] + zb and span_b[0] < span_a[1] + za
