"""Program <-> JSON. Values are self-describing ("r3", "p1", "@label", "%global_id", address
objects); enums and types are decoded by the field's annotation."""

from __future__ import annotations

import enum
import json
import math
import types
import typing
from dataclasses import fields, is_dataclass

from eidos.errors import IsaError, did_you_mean
from eidos.jsondoc import read, show

from .address import Address, Label, Predicate, Register, Space, Special
from .instructions import INSTRUCTIONS, Instruction, MapStep
from .types import Type

FORMAT = "eidos.isa.program"
VERSION = 1
MAX_DEPTH = 100  # programs nest a few levels; a JSON kernel's expression 50 operators deep


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


def _parse_ref(s):
    if not isinstance(s, str):
        raise ValueError(f"cannot read {s!r} (expected r<n>, p<n>, @label or %special)")
    if s.startswith("@"):
        return Label(s[1:])
    if s.startswith("%"):
        return Special(s[1:])
    if s[:1] in ("r", "p") and s[1:].lstrip("-").isdigit():
        return (Register if s[0] == "r" else Predicate)(int(s[1:]))
    raise ValueError(f"cannot read {s!r} (expected r<n>, p<n>, @label or %special)")


def _int(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not -(2**63) <= v < 2**64:
        raise ValueError(f"{what} must be a 64-bit integer, got {show(v)}")
    return v


def decode_value(hint, v):
    if v is None:
        return None
    if isinstance(v, dict):
        if "float" in v:
            if not isinstance(v["float"], str):
                raise ValueError(f"cannot read {v!r} (expected {{\"float\": \"inf\"}} and the like)")
            return float(v["float"])
        if "space" in v:
            space = Space(v["space"])
            if space is Space.REGISTER:
                return Address.register(_parse_ref(v["reg"]))
            offset = _int(v.get("offset", 0), "an address offset")
            if space is Space.SHARED:
                return Address.shared(offset)
            handle = _int(v["class_id"] if space is Space.CLASS else v["handle"], "an address handle")
            return Address(space, handle, offset, None, _bool(v.get("reinterpret", False)))
        if "operation" in v:
            from .instructions import BinaryMapOperation, MapOperation

            op = v["operation"]
            operation = BinaryMapOperation(op) if v.get("b") is not None else MapOperation(op)
            return MapStep(decode_value(Address, v["dst"]), operation, decode_value(Address | Register, v["a"]),
                           decode_value(Address | Register, v.get("b")))
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
        if isinstance(v, int) and v.bit_length() > (1023 if hint is float else 4096):  # I4096 is the widest type
            raise ValueError(f"a {v.bit_length()}-bit integer is out of range")
        return float(v) if hint is float else v
    raise ValueError(f"cannot read {v!r}")


def _bool(v) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"expected true or false, got {v!r}")
    return v


def fits(hint, v) -> bool:
    """Whether a decoded value is what a field's annotation says (a document may hold anything)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(fits(h, v) for h in typing.get_args(hint))
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(v, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(fits(args[0], x) for x in v)
        return len(args) == len(v) and all(fits(a, x) for a, x in zip(args, v))
    if hint is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if hint is int:
        return isinstance(v, int) and not isinstance(v, bool)
    if isinstance(hint, type) and is_dataclass(hint):  # Register, Address, MapStep, ...: their fields too
        inner = _hints(hint)
        return isinstance(v, hint) and all(fits(inner[f.name], getattr(v, f.name)) for f in fields(hint))
    return isinstance(v, hint) if isinstance(hint, type) else True


def decode_instruction(d: dict, index: int) -> Instruction:
    if not isinstance(d, dict) or "op" not in d:
        raise IsaError(f"instruction {index}: expected an object with an 'op', got {show(d)}")
    op = d["op"]
    cls = INSTRUCTIONS.get(op) if isinstance(op, str) else None
    if cls is None:
        hint = did_you_mean(op, INSTRUCTIONS) if isinstance(op, str) else ""
        name = repr(op) if isinstance(op, str) else show(op)
        raise IsaError(f"instruction {index}: unknown instruction {name}" + (f"; {hint}" if hint else ""))
    hints = _hints(cls)
    names = {f.name for f in fields(cls)}
    extra = set(d) - names - {"op"}
    if extra:
        raise IsaError(f"instruction {index} ({op}): unknown field(s) {_names(extra)}; fields: {sorted(names)}")
    kwargs = {}
    for f in fields(cls):
        if f.name not in d:
            continue
        try:
            kwargs[f.name] = value = decode_value(hints[f.name], d[f.name])
        except (ValueError, KeyError, TypeError) as e:
            raise IsaError(f"instruction {index} ({op}): field {f.name}: {e}") from None
        if not fits(hints[f.name], value):
            raise IsaError(f"instruction {index} ({op}): field {f.name}: {show(d[f.name])} is not a "
                           f"{_hint_text(hints[f.name])}")
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise IsaError(f"instruction {index} ({op}): {e}") from None


def _names(keys) -> list[str]:
    return sorted(k if isinstance(k, str) else show(k) for k in keys)


def _hint_text(hint) -> str:
    return str(hint).replace("eidos.isa.address.", "").replace("eidos.isa.instructions.", "").replace(
        "eidos.isa.types.", "").replace("<class '", "").replace("'>", "")


def from_dict(d: dict):
    from .program import Program

    if d.get("format") != FORMAT:
        raise IsaError(f"not an ISA program: format is {show(d.get('format'))}, expected {FORMAT!r}")
    if d.get("version") != VERSION or isinstance(d.get("version"), bool):
        raise IsaError(f"unsupported ISA program version {show(d.get('version'))} (this eidos reads {VERSION})")
    extra = set(d) - {"format", "version", "instructions", "labels", "entry", "metadata"}
    if extra:
        raise IsaError(f"an ISA program has no key(s) {_names(extra)}")
    body = d.get("instructions")
    if not isinstance(body, list):
        raise IsaError("an ISA program needs an 'instructions' list")
    ins = [decode_instruction(x, i) for i, x in enumerate(body)]
    labels, entry, metadata = d.get("labels", {}), d.get("entry", 0), d.get("metadata", {})
    if not (isinstance(labels, dict) and all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                             for k, v in labels.items())):
        raise IsaError(f"an ISA program's labels map names to instruction indexes, got {show(labels)}")
    if isinstance(entry, bool) or not isinstance(entry, int):
        raise IsaError(f"an ISA program's entry is an instruction index, got {show(entry)}")
    if not isinstance(metadata, dict):
        raise IsaError(f"an ISA program's metadata is an object, got {show(metadata)}")
    return Program(ins, labels, entry, metadata)


def load(obj_or_text) -> dict:
    """A JSON object from text, bytes or an already-parsed dict; IsaError otherwise."""
    obj = read(obj_or_text, error=IsaError, what="ISA program JSON", max_depth=MAX_DEPTH)
    if not isinstance(obj, dict):
        raise IsaError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def from_json(text):
    return from_dict(load(text))
