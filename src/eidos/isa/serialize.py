"""Program <-> JSON. Values are self-describing ("r3", "p1", "@label", "%global_id", address
objects); enums and types are decoded by the field's annotation."""

from __future__ import annotations

import enum
import json
import math
import typing
from dataclasses import fields

from eidos.errors import IsaError, did_you_mean

from .address import Address, Label, Predicate, Register, Space, Special
from .instructions import INSTRUCTIONS, Instruction, MapStep
from .types import Type

FORMAT = "eidos.isa.program"
VERSION = 1


def encode_value(v):
    if isinstance(v, (Register, Predicate, Label, Special)):
        return str(v)
    if isinstance(v, Type):
        return v.name
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, Address):
        out = {"space": v.space.value}
        if v.space is Space.REGISTER:
            out["reg"] = str(v.reg)
        else:
            if v.space is not Space.SHARED:
                out["class_id" if v.space is Space.CLASS else "handle"] = v.handle
            out["offset"] = v.offset
            if v.reinterpret:
                out["reinterpret"] = True
        return out
    if isinstance(v, MapStep):
        return {"dst": encode_value(v.dst), "operation": v.operation.value, "a": encode_value(v.a),
                "b": encode_value(v.b)}
    if isinstance(v, tuple):
        return [encode_value(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return {"float": repr(v)}
    return v


def encode_instruction(ins: Instruction) -> dict:
    out = {"op": ins.name}
    for f in fields(ins):
        out[f.name] = encode_value(getattr(ins, f.name))
    return out


def to_dict(program) -> dict:
    return {"format": FORMAT, "version": VERSION,
            "instructions": [encode_instruction(i) for i in program.instructions],
            "labels": dict(program.labels), "entry": program.entry, "metadata": dict(program.metadata)}


def to_json(program, indent: int | None = 1) -> str:
    return json.dumps(to_dict(program), indent=indent)


def canonical(program) -> str:
    """The cache key's input: compact JSON with sorted keys (metadata left out: it does not change results)."""
    d = to_dict(program)
    del d["metadata"]
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


# ---- decoding ---------------------------------------------------------------------------------

_HINTS: dict[type, dict] = {}


def _hints(cls) -> dict:
    h = _HINTS.get(cls)
    if h is None:
        from . import instructions

        h = _HINTS[cls] = typing.get_type_hints(cls, vars(instructions))
    return h


def _enum_choices(hint) -> list[type]:
    opts = typing.get_args(hint) or (hint,)
    return [o for o in opts if isinstance(o, type) and issubclass(o, enum.Enum) and o is not Special]


def _parse_ref(s: str):
    if s.startswith("@"):
        return Label(s[1:])
    if s.startswith("%"):
        return Special(s[1:])
    if s[:1] in ("r", "p") and s[1:].lstrip("-").isdigit():
        return (Register if s[0] == "r" else Predicate)(int(s[1:]))
    raise ValueError(f"cannot read {s!r} (expected r<n>, p<n>, @label or %special)")


def decode_value(hint, v):
    if v is None:
        return None
    if isinstance(v, dict):
        if "float" in v:
            return float(v["float"])
        if "space" in v:
            space = Space(v["space"])
            if space is Space.REGISTER:
                return Address.register(_parse_ref(v["reg"]))
            if space is Space.SHARED:
                return Address.shared(v.get("offset", 0))
            handle = v["class_id"] if space is Space.CLASS else v["handle"]
            return Address(space, int(handle), int(v.get("offset", 0)), None, bool(v.get("reinterpret", False)))
        if "operation" in v:
            from .instructions import BinaryMapOperation, MapOperation

            op = v["operation"]
            operation = BinaryMapOperation(op) if v.get("b") is not None else MapOperation(op)
            return MapStep(decode_value(Address, v["dst"]), operation, decode_value(Address, v["a"]),
                           decode_value(Address, v.get("b")))
        raise ValueError(f"cannot read object {v!r}")
    if isinstance(v, list):
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode_value(args[0], x) for x in v)
        if args and len(args) == len(v):
            return tuple(decode_value(a, x) for a, x in zip(args, v))
        return tuple(decode_value(None, x) for x in v)
    if isinstance(v, str):
        for e in _enum_choices(hint):
            if e is Type:
                return Type.parse(v)
            try:
                return e(v)
            except ValueError:
                continue
        return _parse_ref(v)
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return float(v) if hint is float else v
    raise ValueError(f"cannot read {v!r}")


def decode_instruction(d: dict, index: int) -> Instruction:
    if not isinstance(d, dict) or "op" not in d:
        raise IsaError(f"instruction {index}: expected an object with an 'op', got {d!r}")
    op = d["op"]
    cls = INSTRUCTIONS.get(op)
    if cls is None:
        hint = did_you_mean(str(op), INSTRUCTIONS)
        raise IsaError(f"instruction {index}: unknown instruction {op!r}" + (f"; {hint}" if hint else ""))
    hints = _hints(cls)
    names = {f.name for f in fields(cls)}
    extra = set(d) - names - {"op"}
    if extra:
        raise IsaError(f"instruction {index} ({op}): unknown field(s) {sorted(extra)}; fields: {sorted(names)}")
    kwargs = {}
    for f in fields(cls):
        if f.name not in d:
            continue
        try:
            kwargs[f.name] = decode_value(hints[f.name], d[f.name])
        except (ValueError, KeyError, TypeError) as e:
            raise IsaError(f"instruction {index} ({op}): field {f.name}: {e}") from None
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise IsaError(f"instruction {index} ({op}): {e}") from None


def from_dict(d: dict):
    from .program import Program

    if d.get("format") != FORMAT:
        raise IsaError(f"not an ISA program: format is {d.get('format')!r}, expected {FORMAT!r}")
    if d.get("version") != VERSION:
        raise IsaError(f"unsupported ISA program version {d.get('version')!r} (this eidos reads {VERSION})")
    body = d.get("instructions")
    if not isinstance(body, list):
        raise IsaError("an ISA program needs an 'instructions' list")
    ins = [decode_instruction(x, i) for i, x in enumerate(body)]
    return Program(ins, d.get("labels", {}), d.get("entry", 0), d.get("metadata", {}))


def load(obj_or_text) -> dict:
    """A JSON object from text, bytes or an already-parsed dict; IsaError otherwise."""
    obj = obj_or_text
    if isinstance(obj, (str, bytes, bytearray)):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as e:
            raise IsaError(f"JSON does not parse: {e}") from None
    if not isinstance(obj, dict):
        raise IsaError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def from_json(text):
    return from_dict(load(text))
