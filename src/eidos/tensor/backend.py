"""Tensor op dispatch: backends, the rules that pick one per program, priority and fallback.

A tensor backend runs ISA programs whose buffers are NumPy arrays bound by slot (slot i is
buffer handle i + 1). Built in: `cpu` (the ISA CpuBackend, numba), `gpu` (registered; reports
unavailable until its Triton kernels land) and `reference` (the ISA ReferenceBackend, pure
Python, for checking). `register_backend(name, backend)` adds one.

Selection for one program (`select_backend`), highest rule first:
1. an explicit backend (`set_backend(name)`, or `backend_name`), when available and capable;
2. otherwise the priority list (`set_backend_priority`, default gpu, cpu, reference): the first
   backend that is available, has the operation in `get_capabilities()["operations"]`, and, for
   a device backend (`requires_gpu` capability), sees an input at least THRESHOLDS[op_type]
   bytes (smaller work stays on the CPU: launch and copy costs dominate).
Every skipped backend is recorded with its reason; `ei.tensor.explain(t)` prints them. At run
time a backend raising UnsupportedError hands the program to the next candidate (recorded and
warned); any other error propagates.
"""

from __future__ import annotations

import abc
import threading
import warnings
from typing import NamedTuple
from dataclasses import dataclass, field

import numpy as np

from eidos.errors import BackendUnavailable, FallbackWarning, PlanError, UnsupportedError
from eidos.hal.devices import detect_devices  # the same function as ei.detect_devices
from eidos.isa.launch import ExecutionParams

OPERATIONS = ("elementwise", "reduction", "matmul", "softmax", "layer_norm")

# Minimum total input bytes for a device (GPU) backend to take an operation; below it the CPU is
# faster because a launch (~12 us host time for Triton) and host<->device copies dominate.
THRESHOLDS: dict[str, int] = {
    "elementwise": 4 << 20,
    "reduction": 4 << 20,
    "matmul": 256 << 10,
    "softmax": 4 << 20,
    "layer_norm": 4 << 20,
}
THRESHOLDS_PROVENANCE = (
    "Estimates, not measurements: the launch cost (Triton ~12 us, torch CUDA op ~6 us on the H200, "
    "DESIGN.md anchors) against the CPU's ~16 GB/s per core streaming rate puts the element-wise "
    "crossover near 0.2-1 MB; copies over PCIe (~25 GB/s) for data not already on the device move it "
    "to a few MB, hence 4 MiB; matmul does O(n^3) work on O(n^2) bytes, hence 256 KiB. To be replaced "
    "by figures measured on a real GPU when the gpu backend gets its Triton kernels (set_threshold "
    "overrides them at run time).")
DEFAULT_THRESHOLDS = dict(THRESHOLDS)


def set_threshold(op_type: str, nbytes: int | None) -> None:
    """Override the GPU crossover for one operation kind (None: back to the default)."""
    if op_type not in DEFAULT_THRESHOLDS:
        raise PlanError(f"unknown operation kind {op_type!r}; kinds: {', '.join(OPERATIONS)}")
    THRESHOLDS[op_type] = DEFAULT_THRESHOLDS[op_type] if nbytes is None else int(nbytes)
    _changed()


class OperationProperties(NamedTuple):
    """What the dispatcher knows about one program before running it."""
    op_type: str
    input_size_bytes: int
    requires_gpu: bool = False


class Backend(abc.ABC):
    """A tensor backend. execute(program, args, launch) runs one ISA program with args[i] (C-contiguous
    NumPy arrays) as slot i's buffer; outputs are written into their arrays. `launch` is an
    isa.LaunchConfig, or an isa.ExecutionParams when the program takes kernel arguments (the
    constants of a lane-form program, as starting register values)."""

    name = "backend"

    @abc.abstractmethod
    def execute(self, program, args, config) -> None: ...

    @abc.abstractmethod
    def is_available(self) -> bool: ...

    @abc.abstractmethod
    def get_capabilities(self) -> dict:
        """{"operations": set of OPERATIONS it runs, "device": "cpu" | "gpu", "requires_gpu": bool, ...}."""

    def unavailable_reason(self) -> str:
        return "" if self.is_available() else "unavailable"


class IsaBackend(Backend):
    """Runs programs on an eidos.isa kernel backend, binding NumPy arrays as its buffers (no copies)."""

    isa_name = ""

    def __init__(self) -> None:
        self._isa = None
        self._lock = threading.Lock()
        self._empty = np.zeros(0, dtype=np.uint8)

    @property
    def isa(self):
        if self._isa is None:
            from eidos.isa import backends

            self._isa = getattr(backends, self.isa_name)()
        return self._isa

    def _bind(self, n: int):
        be = self.isa
        mem = be.memory
        while len(mem.buffers) < n:
            h = be.allocate_buffer(0)
            if h != len(mem.buffers):
                raise RuntimeError("tensor backend: slot buffers must be the ISA backend's first handles")
        return mem

    # Arrays up to this many bytes are copied into persistent slot buffers instead of being bound
    # in place: a kernel backend binds its compiled kernels to buffer objects, so keeping the same
    # buffers lets a repeated small program skip re-binding (copying 64 KiB costs ~2 us).
    COPY_MAX_BYTES = 64 << 10

    def execute(self, program, args, config, outputs=None) -> None:
        """outputs: the slots written (default: the last); only they are copied back in copy mode."""
        with self._lock:
            mem = self._bind(len(args))
            small = True
            for a in args:
                if a.nbytes > self.COPY_MAX_BYTES:
                    small = False
                    break
            if small:
                self._run_copied(program, args, config, mem, outputs)
                return
            for i, a in enumerate(args):
                mem.buffers[i + 1] = a.reshape(-1).view(np.uint8) if a.size else self._empty
            mem.generation += 1
            try:
                self._launch(program, config)
            finally:
                for i in range(len(args)):
                    mem.buffers[i + 1] = self._empty
                mem.generation += 1

    def _run_copied(self, program, args, config, mem, outputs) -> None:
        bufs = mem.buffers
        if outputs is None:
            outputs = program.metadata.get("eidos.tensor.outputs")
        out_slots = outputs if outputs is not None else [i for i, a in enumerate(args) if a.flags.writeable]
        for i, a in enumerate(args):
            h = i + 1
            buf = bufs[h]
            if buf.size < self.COPY_MAX_BYTES:
                buf = bufs[h] = np.zeros(self.COPY_MAX_BYTES, dtype=np.uint8)
                mem.generation += 1
            if a.size and i not in out_slots:
                buf[:a.nbytes] = a.reshape(-1).view(np.uint8)
        self._launch(program, config)
        for i in out_slots:
            a = args[i]
            if a.size:
                a.reshape(-1).view(np.uint8)[...] = bufs[i + 1][:a.nbytes]

    def _launch(self, program, launch) -> None:
        if isinstance(launch, ExecutionParams):
            self.isa.execute_program_with_params(program, launch)
        else:
            self.isa.execute_program(program, launch)

    def is_available(self) -> bool:
        return True

    def get_capabilities(self) -> dict:
        return {"operations": set(OPERATIONS), "device": "cpu", "requires_gpu": False}


class CPUBackend(IsaBackend):
    """The compiled ISA CPU backend (numba; NumPy and the interpreter where numba is absent)."""
    name, isa_name = "cpu", "CpuBackend"

    @property
    def isa(self):
        if self._isa is None:
            from .fastreduce import cpu_backend

            self._isa = cpu_backend()
        return self._isa

    def get_capabilities(self) -> dict:
        return {**super().get_capabilities(), "compiled": "numba (when importable)"}


class ReferenceBackend(IsaBackend):
    """The ISA reference interpreter: pure Python, slow, the definition; for checking."""
    name, isa_name = "reference", "ReferenceBackend"


class GPUBackend(Backend):
    """Registered now so dispatch and explain know it; its Triton kernels come with a later issue."""
    name = "gpu"

    def is_available(self) -> bool:
        return False

    def unavailable_reason(self) -> str:
        info = detect_devices()
        if info.gpu_count == 0:
            return "no GPU detected (detect_devices: gpu_count=0)"
        return (f"GPU present ({', '.join(info.gpu_names)}) but the tensor gpu backend has no kernels yet "
                "(Triton kernels arrive with a later issue)")

    def get_capabilities(self) -> dict:
        return {"operations": set(), "device": "gpu", "requires_gpu": True}

    def execute(self, program, args, config) -> None:
        raise BackendUnavailable(f"tensor backend 'gpu': {self.unavailable_reason()}")


# ---- registry, priority ------------------------------------------------------------------------

_memo: dict = {}
_BACKENDS: dict[str, Backend] = {"gpu": GPUBackend(), "cpu": CPUBackend(), "reference": ReferenceBackend()}
DEFAULT_PRIORITY = ("gpu", "cpu", "reference")
_state = {"priority": list(DEFAULT_PRIORITY), "forced": None, "version": 0}


def _changed() -> None:
    """Selections are memoized per configuration; every change of it starts a new one."""
    _state["version"] += 1
    _memo.clear()


def register_backend(name: str, backend: Backend, *, priority: int | None = None) -> None:
    """Add (or replace) a tensor backend. It joins the priority list at `priority` (default: the end)."""
    if not isinstance(backend, Backend):
        raise PlanError(f"register_backend: {name!r} must be an eidos.tensor.backend.Backend, got "
                        f"{type(backend).__name__}")
    _BACKENDS[name] = backend
    prio = _state["priority"]
    if name in prio:
        prio.remove(name)
    prio.insert(len(prio) if priority is None else priority, name)
    _changed()


def unregister_backend(name: str) -> None:
    if name in DEFAULT_PRIORITY:
        raise PlanError(f"the built-in tensor backend {name!r} cannot be removed")
    _BACKENDS.pop(name, None)
    if name in _state["priority"]:
        _state["priority"].remove(name)
    if _state["forced"] == name:
        _state["forced"] = None
    _changed()


def get_backend(name: str) -> Backend:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise PlanError(f"no tensor backend {name!r}; backends: {', '.join(_BACKENDS)}") from None


def backends() -> dict[str, dict]:
    """Every tensor backend: availability, reason, capabilities."""
    return {n: {"available": b.is_available(), "reason": b.unavailable_reason() or None,
                "operations": sorted(b.get_capabilities().get("operations", ()))} for n, b in _BACKENDS.items()}


def set_backend(name: str | None) -> None:
    """Run every tensor program on `name` (None: automatic selection again)."""
    if name is not None:
        get_backend(name)
    _state["forced"] = name
    _changed()


def set_backend_priority(names) -> None:
    """The order automatic selection tries backends in; unknown names raise, missing ones are not tried."""
    names = list(names)
    for n in names:
        get_backend(n)
    if not names:
        raise PlanError("set_backend_priority: give at least one backend")
    _state["priority"] = names
    _changed()


def get_backend_priority() -> list[str]:
    return list(_state["priority"])


def reset() -> None:
    """Defaults again: automatic selection, priority gpu, cpu, reference, default thresholds."""
    _state["priority"] = list(DEFAULT_PRIORITY)
    _state["forced"] = None
    THRESHOLDS.update(DEFAULT_THRESHOLDS)
    _changed()


@dataclass
class Selection:
    """The backend chosen for one program, why, and every backend passed over with its reason."""
    name: str
    rule: str
    rejected: list = field(default_factory=list)   # (name, reason)
    candidates: list = field(default_factory=list)  # the ones that may run it, in order

    def __str__(self) -> str:
        out = f"backend: {self.name} ({self.rule})"
        if self.rejected:
            out += "; rejected: " + ", ".join(f"{n} ({r})" for n, r in self.rejected)
        return out


def _rejection(name: str, b: Backend, op: OperationProperties, info) -> str | None:
    if not b.is_available():
        return b.unavailable_reason() or "unavailable"
    caps = b.get_capabilities()
    if op.op_type not in caps.get("operations", ()):
        return f"lacks {op.op_type}"
    device = caps.get("requires_gpu", False)
    if op.requires_gpu and not device:
        return "not a GPU backend"
    if device:
        if info is not None and info.gpu_count == 0:
            return "no GPU detected"
        limit = THRESHOLDS.get(op.op_type, 0)
        if op.input_size_bytes < limit and not op.requires_gpu:
            return f"{op.input_size_bytes} bytes < GPU threshold {limit} for {op.op_type}"
    return None


def select_backend(backend_name: str | None, op_props: OperationProperties, device_info=None) -> Selection:
    """Choose the backend for one program (rules in this module's doc). Automatic selections are memoized
    per (operation kind, size class) until the configuration changes through this module's functions."""
    if device_info is None and backend_name is None:
        big = op_props.input_size_bytes >= THRESHOLDS.get(op_props.op_type, 0)
        key = (op_props.op_type, big, op_props.requires_gpu, _state["version"])
        sel = _memo.get(key)
        if sel is None:
            if len(_memo) > 256:
                _memo.clear()
            sel = _memo[key] = _select(None, op_props, detect_devices())
        return sel  # shared: run() copies it before recording a fallback
    return _select(backend_name, op_props, device_info if device_info is not None else detect_devices())


def _select(backend_name, op_props, info) -> Selection:
    forced = backend_name if backend_name is not None else _state["forced"]
    rejected: list = []
    if forced is not None:
        b = get_backend(forced)
        why = _rejection(forced, b, op_props, None)
        if why is None:
            rest = [n for n in _state["priority"] if n != forced and _rejection(n, _BACKENDS[n], op_props, info) is None]
            return Selection(forced, "explicit backend", [], [forced, *rest])
        rejected.append((forced, why))
    order = [n for n in _state["priority"] if n in _BACKENDS]
    ok = []
    for n in order:
        if forced is not None and n == forced:
            continue
        why = _rejection(n, _BACKENDS[n], op_props, info)
        if why is None:
            ok.append(n)
        else:
            rejected.append((n, why))
    if not ok:
        raise UnsupportedError(f"no tensor backend can run {op_props.op_type} ({op_props.input_size_bytes} bytes): "
                               + "; ".join(f"{n}: {r}" for n, r in rejected))
    rule = "priority order" if forced is None else f"explicit backend {forced!r} cannot run it, fell back by priority"
    return Selection(ok[0], rule, rejected, ok)


def run(program, args, config, op_props: OperationProperties, outputs=None) -> Selection:
    """Select, execute, and on UnsupportedError fall back to the next candidate (recorded and warned)."""
    sel = select_backend(None, op_props)
    for i, name in enumerate(sel.candidates):
        try:
            b = _BACKENDS[name]
            if isinstance(b, IsaBackend):
                b.execute(program, args, config, outputs)
            else:
                b.execute(program, args, config)
        except UnsupportedError as e:
            if i == 0:
                sel = Selection(sel.name, sel.rule, list(sel.rejected), list(sel.candidates))
            sel.rejected.append((name, f"raised UnsupportedError at run time: {e}"))
            if i + 1 < len(sel.candidates):
                warnings.warn(f"tensor backend {name!r} cannot run this {op_props.op_type} program ({e}); "
                              f"falling back to {sel.candidates[i + 1]!r}", FallbackWarning, stacklevel=4)
                continue
            raise
        if name != sel.name:
            sel.name, sel.rule = name, "fallback after UnsupportedError"
        return sel
    raise UnsupportedError(f"no tensor backend ran {op_props.op_type}")


__all__ = ["Backend", "IsaBackend", "CPUBackend", "GPUBackend", "ReferenceBackend", "OperationProperties",
           "Selection", "select_backend", "register_backend", "unregister_backend", "get_backend", "backends",
           "set_backend", "set_backend_priority", "get_backend_priority", "set_threshold", "THRESHOLDS",
           "THRESHOLDS_PROVENANCE", "detect_devices", "reset", "OPERATIONS"]
