"""The control plane's messages: JSON bodies of Flight actions, checked field by field before use.

Nothing here unpickles or imports: a message is JSON, its fields have the types `ACTIONS` says, and
anything else is a PlanError that names the action, the field and what it should be. Errors travel
back as {"error": class name, "message": text}; the client raises that class only when it is one of
eidos.errors' (`error_from`), so a message cannot make it build an arbitrary object.
"""

from __future__ import annotations

import json
from typing import Any

from eidos import errors as E

PROTOCOL = 1
MAX_MESSAGE = 64 * 1024 * 1024   # bytes of one control message (a plan with embedded tables fits)

# action -> (required fields and their JSON types, optional fields and theirs)
ACTIONS: dict[str, tuple[dict[str, type | tuple], dict[str, type | tuple]]] = {
    "open_session": ({"protocol": int}, {"client": str}),
    "run_subgraph": ({"session": str, "fragment": dict}, {"timeout": (int, float)}),
    "cancel": ({"session": str, "plan_id": str}, {}),
    "release": ({"session": str, "handles": list}, {}),
    "close_session": ({"session": str}, {}),
    "health": ({}, {}),
}


def encode(message: dict) -> bytes:
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode()


def decode(action: str, body: bytes) -> dict[str, Any]:
    """The body of `action`, checked; PlanError naming what is wrong."""
    if action not in ACTIONS:
        raise E.PlanError(f"unknown action {action!r}; this service answers: {', '.join(ACTIONS)}")
    if len(body) > MAX_MESSAGE:
        raise E.PlanError(f"{action}: the message is {len(body):,} bytes, over the limit of {MAX_MESSAGE:,}; "
                          "send large data on the data channel (put_buffer, put_table)")
    message = load(body, action)
    required, optional = ACTIONS[action]
    for name in message:
        if name not in required and name not in optional:
            raise E.PlanError(f"{action}: unknown field {name!r}; fields are: {', '.join([*required, *optional])}")
    for name in required:
        if name not in message:
            raise E.PlanError(f"{action}: field {name!r} is missing")
    for name, kind in (required | optional).items():
        if name in message:
            field(message, name, kind, action)
    return message


def load(body: bytes | str, what: str) -> Any:
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise E.PlanError(f"{what}: the message is not valid JSON ({e})") from None
    if not isinstance(message, dict):
        raise E.PlanError(f"{what}: the message must be a JSON object, got {type(message).__name__}")
    return message


def field(message: dict, name: str, kind: type | tuple, what: str, *, default: Any = ...) -> Any:
    """message[name], checked to be of `kind` (bool is not an int here)."""
    if name not in message:
        if default is ...:
            raise E.PlanError(f"{what}: field {name!r} is missing")
        return default
    value = message[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        names = " or ".join(_json_name(k) for k in kinds)
        raise E.PlanError(f"{what}: field {name!r} must be {names}, got {_json_name(type(value))} {_short(value)}")
    return value


def error_body(e: BaseException) -> bytes:
    """An error as the client will see it: an eidos error keeps its class; anything else is an
    ExecutionError naming the exception's type (the server's traceback stays in the server's log)."""
    if isinstance(e, E.EidosError):
        return encode({"error": type(e).__name__, "message": str(e)})
    return encode({"error": "ExecutionError", "message": f"the service failed: {type(e).__name__}: {e}"})


def error_from(body: bytes | memoryview | None, fallback: str) -> E.EidosError:
    """The eidos error a peer's error body names (a Flight error's extra info, an ERROR frame's payload):
    ExecutionError when it names none of eidos.errors' classes; `fallback` when it carries no message."""
    try:
        message = json.loads(bytes(body)) if body else {}
    except ValueError:
        message = {}
    name = message.get("error") if isinstance(message, dict) else None
    text = message.get("message") if isinstance(message, dict) else None
    cls = getattr(E, name, None) if isinstance(name, str) else None
    if not (isinstance(cls, type) and issubclass(cls, E.EidosError)):
        cls = E.ExecutionError
    return cls(text if isinstance(text, str) else fallback)


def _json_name(kind: type) -> str:
    return {int: "an integer", float: "a number", str: "a string", dict: "an object", list: "an array",
            bool: "true or false", type(None): "null"}.get(kind, kind.__name__)


def _short(value: Any) -> str:
    text = json.dumps(value)[:40]
    return text + ("..." if len(text) == 40 else "")
