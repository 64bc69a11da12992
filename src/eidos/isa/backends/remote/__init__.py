"""The remote kernel target: buffers live on an eidos service and programs run there (issue 14).

Each call is an "isa" fragment of the service's session (eidos.remote.jobs): allocate, write (bytes sent on
the data channel), read (a result fetched from it), free, execute, state. A program travels as validated JSON
once and then by its digest. Buffers, pools and class memory all live on the service, in a kernel-target
instance of this object's own (handles from 1, as a new target has), so a program that names its handles
runs unchanged; the instance is dropped on the service when this object is collected.
"""

from __future__ import annotations

import os
import threading
import uuid
import weakref

import numpy as np

from eidos.errors import BackendError, BackendUnavailable, PlanError

from ...launch import ExecutionParams
from ...memory import Memory, _as_bytes, _writable_bytes
from ...program import Program
from ...target import Target
from ...types import Type

MAX_PROGRAMS = 256      # the programs a service's session keeps by digest (eidos.remote.jobs.MAX_PROGRAMS)
ENV = "EIDOS_REMOTE"    # eidos://host:port of a service to use when no connection is open (token: EIDOS_REMOTE_TOKEN),
                        # and EIDOS_REMOTE_TARGET the service's kernel target to run on (default: the service's first)


_closing: list[tuple[object, dict]] = []     # (connection, close fragment) of collected targets, sent later
_closing_lock = threading.Lock()


def _close_later(remote, fragment: dict) -> None:
    """A collected target's instance is dropped with the next call (a finalizer may run inside a call)."""
    with _closing_lock:
        _closing.append((remote, fragment))


def _send_closes() -> None:
    with _closing_lock:
        pending, _closing[:] = list(_closing), []
    for remote, fragment in pending:
        if not getattr(remote, "closed", False):
            remote.run_subgraph(fragment)


def _connection():
    """The open connection (eidos.remote.current()), or one to $EIDOS_REMOTE; None when there is neither."""
    import eidos.remote as remote

    conn = remote.current()
    if conn is None and os.environ.get(ENV):
        conn = remote.connect(os.environ[ENV], token=os.environ.get(f"{ENV}_TOKEN"))
    return conn


def unavailable_reason() -> str | None:
    try:
        conn = _connection()
    except Exception as e:  # noqa: BLE001 - a service that cannot be reached makes the target unavailable, with why
        return f"cannot reach the service at ${ENV}: {e}"
    if conn is None:
        return f"no eidos service: connect to one first (ei.connect('eidos://host:port', token=...)) or set ${ENV}"
    return None


class RemoteBackend(Target):
    """A kernel target on a service: `remote` a connection (default: the open one), `target` the service's
    kernel target (default: $EIDOS_REMOTE_TARGET, else the service's first: triton on a GPU node)."""

    name = "remote"

    def __init__(self, remote=None, target: str | None = None) -> None:
        super().__init__()
        self.remote = remote or _connection()
        if self.remote is None:
            raise BackendUnavailable(unavailable_reason() or "no eidos service")
        self.target = target or os.environ.get(f"{ENV}_TARGET") or None
        self.instance = uuid.uuid4().hex                          # this object's target instance on the service
        self.programs: dict[str, None] = {}                      # digests the session holds, oldest first
        self._fragment = {"kind": "isa", "instance": self.instance}
        if self.target is not None:
            self._fragment["target"] = self.target
        weakref.finalize(self, _close_later, self.remote, {**self._fragment, "ops": [{"op": "close"}]})

    def _run(self, *ops: dict) -> list:
        _send_closes()
        return self.remote.run_subgraph({**self._fragment, "ops": list(ops)})

    def _done(self, handles) -> None:
        """Release what the service keeps of these handles (outcomes, id 0, are kept by nobody)."""
        kept = [h for h in handles if _meta(h)["id"]]
        if kept:
            self.remote.release(*kept)

    # ---- execution -----------------------------------------------------------------------
    def execute_program_with_params(self, program: Program, params: ExecutionParams) -> None:
        if not isinstance(program, Program):
            raise BackendError(f"execute: expected a Program, got {type(program).__name__}")
        self.check_params(params, program)   # against the typed buffers here, before anything is sent
        program.validate()
        from ...serialize import to_dict

        c = params.config
        op = {"op": "execute", "config": {"grid": list(c.grid), "block": list(c.block),
                                          "shared_memory": c.shared_memory},
              "registers": {str(k): _json_number(v) for k, v in params.registers.items()}}
        key = program.digest()
        if key in self.programs:
            try:
                self._done(self._run({**op, "program_key": key}))
                return
            except PlanError:   # the session no longer holds it (another target on the connection sent more)
                del self.programs[key]
        self._done(self._run({**op, "program": to_dict(program)}))
        self.programs[key] = None
        if len(self.programs) > MAX_PROGRAMS:
            self.programs.pop(next(iter(self.programs)))

    # ---- buffers and pools: the service's target keeps them and checks every handle ---------------
    def allocate_buffer(self, size: int, ty: Type | None = None) -> int:
        size = Memory._size(size, "allocate_buffer")      # checked here as Memory checks it for every target
        if ty is not None and not isinstance(ty, Type):
            raise BackendError(f"allocate_buffer: ty must be an eidos.isa.Type or None, got {ty!r}")
        if ty is not None and size % ty.size_bytes:
            raise BackendError(f"allocate_buffer: {size} bytes is not a whole number of {ty.name} elements "
                               f"({ty.size_bytes} bytes each); allocate_typed(count, ty) takes a count")
        (h,) = self._run({"op": "allocate", "bytes": size, "type": ty.name if ty is not None else None})
        handle = int(_meta(h)["target_buffer"])
        if ty is not None:
            self.memory.types[handle] = ty       # for Memory.check_host_array, as every target checks arrays
        self.memory.generation += 1              # a program's type check (Memory.check_types) is made again
        return handle

    def allocate_typed(self, count: int, ty: Type) -> int:
        if not isinstance(ty, Type):
            raise BackendError(f"allocate_typed: ty must be an eidos.isa.Type, got {ty!r}")
        return self.allocate_buffer(Memory._size(count, "allocate_typed") * ty.size_bytes, ty)

    def _describe(self, space: str, handle, what: str) -> dict:
        return _meta(self._run({"op": "describe", "space": space, "buffer": _handle(handle, space, what)})[0])

    def buffer_type(self, handle: int) -> Type | None:
        ty = self._describe("buffer", handle, "buffer_type")["type"]
        return Type.parse(ty) if ty else None

    def buffer_length(self, handle: int) -> int:
        d = self._describe("buffer", handle, "buffer_length")
        return d["bytes"] // (Type.parse(d["type"]).size_bytes if d["type"] else 1)

    def buffer_size(self, handle: int) -> int:
        return self._describe("buffer", handle, "buffer_size")["bytes"]

    def free_buffer(self, handle: int) -> None:
        self._run({"op": "free", "buffer": _handle(handle, "buffer", "free_buffer")})
        self.memory.types.pop(handle, None)
        self.memory.generation += 1

    def copy_to_buffer(self, handle: int, data, offset: int = 0) -> None:
        what = f"copy_to_buffer({handle})"
        self.memory.check_host_array(_handle(handle, "buffer", what), data, what)
        self._write({"buffer": handle, "offset": int(offset)}, data, what)

    def copy_from_buffer(self, handle: int, out, offset: int = 0) -> None:
        what = f"copy_from_buffer({handle})"
        self.memory.check_host_array(_handle(handle, "buffer", what), out, what)
        self._read({"buffer": handle, "offset": int(offset)}, out, what)

    def allocate_pool(self, size: int) -> int:
        size = Memory._size(size, "allocate_pool")
        (h,) = self._run({"op": "allocate", "space": "pool", "bytes": size})
        return int(_meta(h)["target_pool"])

    def free_pool(self, handle: int) -> None:
        self._run({"op": "free", "space": "pool", "buffer": _handle(handle, "pool", "free_pool")})

    def pool_size(self, handle: int) -> int:
        return self._describe("pool", handle, "pool_size")["bytes"]

    def copy_to_pool(self, handle: int, offset: int, data) -> None:
        what = f"copy_to_pool({handle})"
        self._write({"space": "pool", "buffer": _handle(handle, "pool", what), "offset": int(offset)}, data, what)

    def copy_from_pool(self, handle: int, offset: int, out) -> None:
        what = f"copy_from_pool({handle})"
        self._read({"space": "pool", "buffer": _handle(handle, "pool", what), "offset": int(offset)}, out, what)

    # ---- class memory, on the service too ---------------------------------------------------------
    def copy_to_class(self, class_id: int, offset: int, data) -> None:
        self._class_offset(class_id, offset, "copy_to_class")
        self._write({"space": "class", "class": int(class_id), "offset": int(offset)}, data, "copy_to_class")

    def copy_from_class(self, class_id: int, offset: int, out) -> None:
        self._class_offset(class_id, offset, "copy_from_class")
        self._read({"space": "class", "class": int(class_id), "offset": int(offset)}, out, "copy_from_class")

    def accumulators(self) -> list[float]:
        (h,) = self._run({"op": "state"})
        return [float(v) for v in _meta(h)["accumulators"]]

    def phases(self) -> list[int]:
        (h,) = self._run({"op": "state"})
        return [int(v) for v in _meta(h)["phases"]]

    def _write(self, where: dict, data, what: str) -> None:
        buf = self.remote.put_buffer(memoryview(_as_bytes(data, what)), wait=False)   # the write waits for it there
        try:
            self._run({"op": "write", "data": _meta(buf)["id"], **where})
        finally:
            self._done([buf])

    def _read(self, where: dict, out, what: str) -> None:
        view = _writable_bytes(out, what)                 # refused as every target refuses it, before any call
        (h,) = self._run({"op": "read", "bytes": int(view.size), **where})
        try:
            view[:] = np.frombuffer(self.remote.fetch_result(h), np.uint8)
        finally:
            self._done([h])


def _handle(handle, kind: str, what: str) -> int:
    """A handle as JSON carries it; BackendError worded as Memory words it when it is not an int."""
    if isinstance(handle, bool) or not isinstance(handle, (int, np.integer)):
        raise BackendError(f"{what}: a {kind} handle must be an int, got {type(handle).__name__}")
    return int(handle)


def _json_number(v):
    """A register value as JSON carries it: non-finite floats as 'nan', 'inf', '-inf'."""
    return v if isinstance(v, int) or v == v and abs(v) != float("inf") else repr(float(v))


def _meta(handle) -> dict:
    """A handle's fields (a client Handle object or its JSON)."""
    if isinstance(handle, dict):
        return handle
    fields = dict(getattr(handle, "meta", None) or {})
    fields.setdefault("id", handle.id)
    return fields


__all__ = ["RemoteBackend"]
