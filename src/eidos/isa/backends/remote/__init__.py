"""The remote kernel target: buffers live on an eidos service and programs run there (issue 14).

Each call is an "isa" fragment of the service's session (eidos.remote.jobs): allocate, write (bytes sent on
the data channel), read (a result fetched from it), free, execute. A program travels as validated JSON once
and then by its digest. The buffer handles are the service's target's own, so a program that names them runs
unchanged. Pools and class memory stay on the client in the other targets' Memory, which a remote program
cannot see: they are refused here rather than silently apart.
"""

from __future__ import annotations

import os

import numpy as np

from eidos.errors import BackendError, BackendUnavailable, PlanError, UnsupportedError

from ...launch import ExecutionParams
from ...memory import Memory
from ...program import Program
from ...target import Target
from ...types import Type

MAX_PROGRAMS = 256      # the programs a service's session keeps by digest (eidos.remote.jobs.MAX_PROGRAMS)
ENV = "EIDOS_REMOTE"    # eidos://host:port of a service to use when no connection is open (token: EIDOS_REMOTE_TOKEN),
                        # and EIDOS_REMOTE_TARGET the service's kernel target to run on (default: the service's first)


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
        self.buffers: dict[int, tuple[int, Type | None]] = {}   # the service's handle -> (bytes, type)
        self.freed: set[int] = set()
        self.programs: dict[str, None] = {}                      # digests the session holds, oldest first

    def _run(self, *ops: dict) -> list:
        fragment = {"kind": "isa", "ops": list(ops)}
        if self.target is not None:
            fragment["target"] = self.target
        return self.remote.run_subgraph(fragment)

    def _done(self, handles) -> None:
        """Release what the service keeps of these handles (outcomes, id 0, are kept by nobody)."""
        kept = [h for h in handles if _meta(h)["id"]]
        if kept:
            self.remote.release(*kept)

    # ---- execution -----------------------------------------------------------------------
    def execute_program_with_params(self, program: Program, params: ExecutionParams) -> None:
        if not isinstance(program, Program):
            raise BackendError(f"execute: expected a Program, got {type(program).__name__}")
        self.check_params(params)
        program.validate()
        from ...serialize import to_dict

        c = params.config
        op = {"op": "execute", "config": {"grid": list(c.grid), "block": list(c.block),
                                          "shared_memory": c.shared_memory},
              "registers": {str(k): v for k, v in params.registers.items()}}
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

    # ---- buffers ---------------------------------------------------------------------------
    def allocate_buffer(self, size: int, ty: Type | None = None) -> int:
        size = Memory._size(size, "allocate_buffer")      # checked here as Memory checks it for every target
        if ty is not None and not isinstance(ty, Type):
            raise BackendError(f"allocate_buffer: ty must be an eidos.isa.Type or None, got {ty!r}")
        if ty is not None and size % ty.size_bytes:
            raise BackendError(f"allocate_buffer: {size} bytes is not a whole number of {ty.name} elements "
                               f"({ty.size_bytes} bytes each); allocate_typed(count, ty) takes a count")
        (h,) = self._run({"op": "allocate", "bytes": size, "type": ty.name if ty is not None else None})
        handle = int(_meta(h)["target_buffer"])
        self.buffers[handle] = (size, ty)
        self.freed.discard(handle)
        if ty is not None:
            self.memory.types[handle] = ty       # for Memory.check_host_array, as every target checks arrays
        return handle

    def allocate_typed(self, count: int, ty: Type) -> int:
        if not isinstance(ty, Type):
            raise BackendError(f"allocate_typed: ty must be an eidos.isa.Type, got {ty!r}")
        return self.allocate_buffer(Memory._size(count, "allocate_typed") * ty.size_bytes, ty)

    def _buffer(self, handle: int, what: str) -> tuple[int, Type | None]:
        """A buffer's size and type; BackendError worded as Memory words it for every other target."""
        try:
            return self.buffers[handle]
        except (KeyError, TypeError):
            if not isinstance(handle, (int, np.integer)) or isinstance(handle, bool):
                raise BackendError(f"{what}: a buffer handle must be an int, got {type(handle).__name__}") from None
            if handle in self.freed:
                raise BackendError(f"{what}: buffer {handle} was freed (use after free)") from None
            raise BackendError(f"{what}: no buffer with handle {handle}; live buffers: "
                               f"{sorted(self.buffers) or 'none'}") from None

    def buffer_type(self, handle: int) -> Type | None:
        return self._buffer(handle, "buffer_type")[1]

    def buffer_length(self, handle: int) -> int:
        size, ty = self._buffer(handle, "buffer_length")
        return size // (ty.size_bytes if ty is not None else 1)

    def buffer_size(self, handle: int) -> int:
        return self._buffer(handle, "buffer_size")[0]

    def free_buffer(self, handle: int) -> None:
        self._buffer(handle, "free_buffer")
        self._run({"op": "free", "buffer": handle})
        del self.buffers[handle]
        self.memory.types.pop(handle, None)
        self.freed.add(handle)

    def copy_to_buffer(self, handle: int, data, offset: int = 0) -> None:
        self._buffer(handle, f"copy_to_buffer({handle})")
        self.memory.check_host_array(handle, data, f"copy_to_buffer({handle})")
        view = _bytes(data, f"copy_to_buffer({handle})")
        buf = self.remote.put_buffer(view, wait=False)   # the write waits for it on the service
        try:
            self._run({"op": "write", "data": _meta(buf)["id"], "buffer": handle, "offset": int(offset)})
        finally:
            self._done([buf])

    def copy_from_buffer(self, handle: int, out, offset: int = 0) -> None:
        self._buffer(handle, f"copy_from_buffer({handle})")
        self.memory.check_host_array(handle, out, f"copy_from_buffer({handle})")
        view = _bytes(out, f"copy_from_buffer({handle})")
        if view.readonly:
            raise BackendError(f"copy_from_buffer({handle}): out must be writable and contiguous")
        (h,) = self._run({"op": "read", "bytes": view.nbytes, "buffer": handle, "offset": int(offset)})
        try:
            view[:] = self.remote.fetch_result(h)
        finally:
            self._done([h])

    # ---- what stays apart from the service ----------------------------------------------------
    def _apart(self, what: str):
        raise UnsupportedError(f"the remote target has no {what}: its programs run on the service, which cannot "
                               "see this process's memory; use buffers")

    def allocate_pool(self, size): self._apart("pools")
    def free_pool(self, handle): self._apart("pools")
    def copy_to_pool(self, handle, offset, data): self._apart("pools")
    def copy_from_pool(self, handle, offset, out): self._apart("pools")
    def pool_size(self, handle): self._apart("pools")
    def copy_to_class(self, class_id, offset, data): self._apart("class memory")
    def copy_from_class(self, class_id, offset, out): self._apart("class memory")
    def accumulators(self): self._apart("class accumulators")
    def phases(self): self._apart("class phases")


def _meta(handle) -> dict:
    """A handle's fields (a client Handle object or its JSON)."""
    if isinstance(handle, dict):
        return handle
    fields = dict(getattr(handle, "meta", None) or {})
    fields.setdefault("id", handle.id)
    return fields


def _bytes(data, what: str) -> memoryview:
    """data's bytes, without a copy where they are contiguous (an array of any dtype, as uint8)."""
    if isinstance(data, np.ndarray):
        if not data.flags.c_contiguous:
            return memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8)).toreadonly()
        return memoryview(data.reshape(-1).view(np.uint8))
    try:
        view = memoryview(data)
    except TypeError:
        raise BackendError(f"{what}: data must be bytes-like or an array, got {type(data).__name__}") from None
    return view.cast("B") if view.c_contiguous else memoryview(bytes(view))


__all__ = ["RemoteBackend"]
