"""Reading a JSON document that may come from anyone (a plan, an ISA program): text, bytes or an
already-parsed value, with every failure of the parser and every document nested too deeply for
the recursive readers after it turned into the caller's error class."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from eidos.errors import EidosError


def show(v: Any, limit: int = 80) -> str:
    """A JSON value for an error message, cut short (even an integer too long for text)."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 64:
        return f"an integer of {v.bit_length()} bits"
    try:
        text = json.dumps(v, default=repr)
    except ValueError:  # an integer of more digits than Python converts to text, deep inside
        return "a value too large to show"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def depth(doc: Any, limit: int, weight: Callable[[dict], int] | None = None) -> int:
    """How deeply lists and objects nest in `doc` (an object counting `weight(obj)` levels, else one),
    counted without recursion; stops once past `limit`."""
    deepest, stack = 0, [(doc, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            d += weight(v) if weight is not None and isinstance(v, dict) else 1
            deepest = max(deepest, d)
            if deepest > limit:
                break
            stack.extend((x, d) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def read(doc: str | bytes | bytearray | Any, *, error: type[EidosError], what: str, max_depth: int,
         weight: Callable[[dict], int] | None = None, levels: str = "") -> Any:
    """The parsed document (`doc` itself when already parsed); `error` when it does not parse or nests
    deeper than `max_depth` levels (`levels` says how they count, for the message)."""
    too_deep = f"{what} nests deeper than eidos reads: {max_depth} levels{levels}"
    if isinstance(doc, (str, bytes, bytearray)):
        try:
            doc = json.loads(doc)
        except RecursionError:
            raise error(too_deep) from None
        except ValueError as e:  # JSONDecodeError, bad UTF-8, an integer of more digits than Python converts
            raise error(f"{what} is malformed: {e}") from None
    if depth(doc, max_depth, weight) > max_depth:
        raise error(too_deep)
    return doc
