"""Tensor op dispatch: backends, the rules that pick one per program, priority and fallback.

A tensor backend runs ISA programs whose buffers are arrays bound by slot (slot i is buffer
handle i + 1): NumPy arrays for host tensors, torch tensors on the device for gpu tensors
(eidos.tensor.storage). There is one per registered kernel target (eidos.isa.registry, the
`eidos.isa.backends` entry points): `cpu` (the cpu target, numba), `gpu` (the triton target,
whose memory holds gpu tensors: CUDA, or Triton's interpreter on the CPU under TRITON_INTERPRET=1),
`reference` (the reference interpreter, pure Python, for checking), and any other installed target
under its own name, running host arrays. `register_backend(name, backend)` adds one at run time.

Selection for one program (`select_backend`), highest rule first:
1. an explicit backend (`set_backend(name)`, or `backend_name`), when available and capable;
2. inputs on the gpu (`OperationProperties.device == "gpu"`): a device backend runs it where
   the data is (host backends stay candidates for a run-time fallback, which copies);
3. otherwise the priority list (`set_backend_priority`, default gpu, cpu, any other installed
   target, reference): the first
   backend that is available, has the operation in `get_capabilities()["operations"]`, and, for
   a device backend (`requires_gpu` capability), runs on a machine where detect_devices() sees a
   GPU (never Triton's interpreter unless asked for explicitly) and sees at least
   THRESHOLDS[op_type] input bytes: the crossover measured with the host<->device copies of
   host-resident inputs counted (smaller work stays on the CPU).
Every skipped backend is recorded with its reason; `ei.tensor.explain(t)` prints them. At run
time a backend raising UnsupportedError hands the program to the next candidate (recorded and
warned); any other error propagates. A backend whose memory is not where the data is gets
copies: run() moves device arrays to the host for a host backend, and a device backend copies
host arrays in and its outputs back; the Selection records the bytes moved.
"""

from __future__ import annotations

import abc
import functools
import json
import os
import threading
import warnings
import weakref
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from eidos.errors import BackendUnavailable, FallbackWarning, PlanError, UnsupportedError, did_you_mean
from eidos.hal.devices import detect_devices  # the same function as ei.detect_devices
from eidos.isa import registry as targets
from eidos.isa.launch import ExecutionParams

from . import storage as _dev

OPERATIONS = ("elementwise", "reduction", "matmul", "softmax", "layer_norm")

# Minimum total input bytes for a device (GPU) backend to take an operation whose inputs are in host
# memory, the host->device copies of the inputs and the device->host copy of the result counted;
# below it the CPU is faster because a launch (~12 us host time for Triton) and the copies dominate.
# bench/gpu_crossover.py measures them (and DEVICE_THRESHOLDS) and writes JSON that load_thresholds reads.
NEVER = 1 << 62  # a threshold no input reaches: the GPU did not win at any size measured

THRESHOLDS: dict[str, int] = {
    "elementwise": NEVER,
    "reduction": NEVER,
    "matmul": 32 << 20,
    "softmax": 1 << 20,
    "layer_norm": 1 << 20,
}
THRESHOLDS_PROVENANCE = (
    "Measured by bench/gpu_crossover.py on cuda:0 (NVIDIA H100 80GB HBM3) (2026-11-26; torch 2.11.0+cu130, "
    "triton 3.6.0, host 16 cores, host->device 8.0 GB/s pageable): the smallest input size from which the gpu "
    "backend beat the cpu one at every larger size, min of 5 runs; host inputs count the copies to the device "
    "and back. Element-wise work and reductions on host-resident inputs never paid (sizes up to 512 MiB and "
    "1 GiB) against the "
    "host's 16 cores (the copies alone cost more than the CPU's pass); data already on the GPU pays from "
    "128 KiB (element-wise) and 4 KiB (reductions), see DEVICE_THRESHOLDS. A machine with fewer cores or a "
    "faster link moves these: rerun the bench there and load_thresholds its JSON.")
DEFAULT_THRESHOLDS = dict(THRESHOLDS)

# The crossover for inputs already on the device (no copies): not used to choose (data on the GPU stays
# there, since moving it back costs more than running there), shown by explain and the bench so a user
# sees from what size keeping data on the GPU pays. None: not measured yet.
DEVICE_THRESHOLDS: dict[str, int | None] = {
    "elementwise": 128 << 10,
    "reduction": 4 << 10,
    "matmul": 2 << 20,
    "softmax": 256 << 10,
    "layer_norm": 256 << 10,
}
_DEFAULT_DEVICE_THRESHOLDS = dict(DEVICE_THRESHOLDS)


def set_threshold(op_type: str, nbytes: int | None) -> None:
    """Override the GPU crossover for one operation kind (None: back to the default)."""
    if op_type not in DEFAULT_THRESHOLDS:
        raise PlanError(f"unknown operation kind {op_type!r}; kinds: {', '.join(OPERATIONS)}")
    THRESHOLDS[op_type] = DEFAULT_THRESHOLDS[op_type] if nbytes is None else int(nbytes)
    _changed()


def load_thresholds(source) -> dict:
    """Set THRESHOLDS (and DEVICE_THRESHOLDS) from bench/gpu_crossover.py's JSON (a path or the parsed
    object): {"host_inputs": {op: bytes}, "device_inputs": {op: bytes}, ...}. Returns what was set."""
    if isinstance(source, (str, os.PathLike)):
        with open(source) as f:
            source = json.load(f)
    if not isinstance(source, dict) or not isinstance(source.get("host_inputs"), dict):
        raise PlanError("load_thresholds: expected gpu_crossover.py's JSON object with a 'host_inputs' mapping "
                        "of operation kind to bytes")
    if source.get("smoke"):
        raise PlanError("load_thresholds: this is a --smoke run of bench/gpu_crossover.py (Triton's interpreter, "
                        "tiny sizes): its figures are not measurements; run it on a CUDA GPU without --smoke")
    for key, table in (("host_inputs", THRESHOLDS), ("device_inputs", DEVICE_THRESHOLDS)):
        for op, nbytes in (source.get(key) or {}).items():
            if op not in OPERATIONS:
                raise PlanError(f"load_thresholds: unknown operation kind {op!r} in {key}; kinds: {', '.join(OPERATIONS)}")
            if nbytes is not None and (isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0):
                raise PlanError(f"load_thresholds: {key}[{op!r}] must be a byte count (int >= 0) or null, "
                                f"got {nbytes!r}")
            table[op] = NEVER if key == "host_inputs" and nbytes is None else nbytes
    _changed()
    return {"host_inputs": dict(THRESHOLDS), "device_inputs": dict(DEVICE_THRESHOLDS)}


class OperationProperties(NamedTuple):
    """What the dispatcher knows about one program before running it; `device` is where its inputs live.
    `op_type` is an operation kind (OPERATIONS) or the name of a tensor operation (`operation_kind`)."""
    op_type: str
    input_size_bytes: int
    requires_gpu: bool = False
    device: str = "cpu"


# The tensor operations by name, for callers that name an operation rather than its kind: the element-wise
# node names (lower.py's UNARY, BINARY, TERNARY) and the public names that differ from them, the reductions.
ELEMENTWISE_PUBLIC = ("subtract", "multiply", "divide", "negative", "floor_divide", "remainder", "equal", "not_equal",
                      "less", "less_equal", "greater", "greater_equal", "bitwise_and", "bitwise_or", "bitwise_xor",
                      "bitwise_left_shift", "bitwise_right_shift", "bitwise_invert", "astype")
REDUCTIONS = ("sum", "prod", "min", "max", "mean", "var", "std", "argmin", "argmax", "any", "all")
_PREFIX = {"elementwise": "elementwise_", "reduction": "reduce_"}


@functools.cache
def _operations() -> dict[str, tuple]:
    """kind -> the names of its operations (besides the kind's own name)."""
    from .lower import BINARY, TERNARY, UNARY

    return {"elementwise": tuple(sorted(UNARY | BINARY | TERNARY | set(ELEMENTWISE_PUBLIC))), "reduction": REDUCTIONS,
            "matmul": ("gemm", "batched_gemm"), "softmax": (), "layer_norm": ()}


@functools.cache
def operation_names() -> dict[str, str]:
    """Every operation name select_backend accepts, with its kind: the kinds themselves; each element-wise
    operation as `<name>` and `elementwise_<name>`; each reduction as `<name>` and `reduce_<name>`; `gemm` and
    `batched_gemm` (the instructions matmul runs as)."""
    names = {kind: kind for kind in OPERATIONS}
    for kind, ops in _operations().items():
        for op in ops:
            names[op] = kind
            if kind in _PREFIX:
                names[_PREFIX[kind] + op] = kind
    return names


def operation_kind(op_type: str) -> str:
    """The kind (OPERATIONS: what capabilities and THRESHOLDS are given per) of an operation name; PlanError
    listing the names there are for an unknown one.

    >>> from eidos.tensor.backend import operation_kind
    >>> operation_kind("elementwise_add"), operation_kind("reduce_sum"), operation_kind("matmul")
    ('elementwise', 'reduction', 'matmul')
    """
    kind = operation_names().get(op_type) if isinstance(op_type, str) else None
    if kind is None:
        ops = _operations()
        hint = did_you_mean(str(op_type), operation_names())
        raise PlanError(f"unknown tensor operation {op_type!r}; operation kinds: {', '.join(OPERATIONS)}; "
                        f"element-wise operations (also as elementwise_<name>): {', '.join(ops['elementwise'])}; "
                        f"reductions (also as reduce_<name>): {', '.join(ops['reduction'])}; "
                        f"matmul also as: {', '.join(ops['matmul'])}" + (f"; {hint}" if hint else ""))
    return kind


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
    """Runs programs on a registered kernel target (eidos.isa.registry), binding NumPy arrays as its
    buffers (no copies). `IsaBackend("name")` serves the target `name` under that name."""

    target = ""   # the kernel target's name in eidos.isa.registry

    def __init__(self, target: str | None = None) -> None:
        if target is not None:
            self.name = self.target = target
        self._isa = None
        self._lock = threading.Lock()
        self._empty = np.zeros(0, dtype=np.uint8)

    @property
    def isa(self):
        if self._isa is None:
            self._isa = targets.create(self.target)
        return self._isa

    def _bind(self, n: int):
        from .lower import SCRATCH_POOL

        if n >= SCRATCH_POOL:
            raise UnsupportedError(f"a tensor program with {n} buffers (at most {SCRATCH_POOL - 1}); realize part of "
                                   "the expression first (ei.realize)")
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
            self._run_bound(program, config, mem,
                            [a.reshape(-1).view(np.uint8) if a.size else self._empty for a in args])

    def _run_bound(self, program, config, mem, views) -> None:
        """Bind `views` (flat byte buffers, zero copy) as slot buffers 1..n of the kernel backend, run, unbind."""
        for i, v in enumerate(views):
            mem.buffers[i + 1] = v
        mem.generation += 1
        try:
            self._launch(program, config)
        finally:
            for i in range(len(views)):
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

    def unavailable_reason(self) -> str:
        return targets.reason(self.target)

    def is_available(self) -> bool:
        return self.unavailable_reason() == ""

    def get_capabilities(self) -> dict:
        return {"operations": set(OPERATIONS), "device": "cpu", "requires_gpu": False}


class CPUBackend(IsaBackend):
    """The compiled ISA CPU backend (numba; NumPy and the interpreter where numba is absent)."""
    name = target = "cpu"

    def get_capabilities(self) -> dict:
        return {**super().get_capabilities(), "compiled": "numba (when importable)"}


class ReferenceBackend(IsaBackend):
    """The ISA reference interpreter: pure Python, slow, the definition; for checking."""
    name = target = "reference"


class GPUBackend(IsaBackend):
    """ISA programs on the ISA TritonBackend, with torch tensors on its device as the slot buffers.

    Device arrays (gpu tensors' data) are bound in place; host arrays (a host tensor's program the
    dispatcher sent here, or set_backend("gpu")) are copied in and the outputs copied back, through
    eidos.tensor.storage. Read-only host arrays (the map form's constant arrays) are copied once and
    kept while the host array lives. Available where the ISA TritonBackend is: torch and triton
    importable, and a CUDA device or TRITON_INTERPRET=1 (which automatic selection never uses: it
    needs detect_devices() to see a GPU)."""
    name, target = "gpu", "triton"   # the target whose device memory holds gpu tensors (storage.py)

    def __init__(self) -> None:
        super().__init__()
        self._reason: tuple | None = None
        self._staged: dict = {}

    # ---- availability ---------------------------------------------------------------------------
    def unavailable_reason(self) -> str:
        key = os.environ.get("TRITON_INTERPRET", "")
        if self._reason is None or self._reason[0] != key:
            self._reason = (key, self._why_unavailable())
        return self._reason[1]

    def _why_unavailable(self) -> str:
        if detect_devices().gpu_count == 0 and not _dev.interpreted():
            return ("no GPU detected (detect_devices: gpu_count=0); TRITON_INTERPRET=1 runs gpu programs on the "
                    "CPU through Triton's interpreter")
        try:
            targets.target_class(self.target)
            _dev.torch_device()
        except BackendUnavailable as e:
            return str(e)
        return ""

    def is_available(self) -> bool:
        return self.unavailable_reason() == ""

    def get_capabilities(self) -> dict:
        return {"operations": set(OPERATIONS), "device": "gpu", "requires_gpu": True,
                "kernels": "Triton (eidos.isa.backends.triton)"}

    @property
    def isa(self):
        if self._isa is None:
            why = self.unavailable_reason()
            if why:
                raise BackendUnavailable(f"tensor backend 'gpu': {why}")
            self._isa = targets.target_class(self.target)(_dev.torch_device())
            self._empty = _dev.as_bytes(_dev.GPU.empty(0, np.dtype(np.uint8)))
        return self._isa

    # ---- execution ------------------------------------------------------------------------------
    def execute(self, program, args, config, outputs=None, scratch=()) -> None:
        """args: device tensors bound in place, or host arrays copied in (outputs copied back)."""
        if outputs is None:
            outputs = program.metadata.get("eidos.tensor.outputs")
            if outputs is None:
                outputs = [i for i, a in enumerate(args) if not _dev.is_device_array(a) and a.flags.writeable]
        with self._lock:
            dev_args, back = [], []
            for i, a in enumerate(args):
                if _dev.is_device_array(a):
                    dev_args.append(a)
                elif i in outputs or i in scratch:
                    dev_args.append(_dev.GPU.empty(a.shape, a.dtype))
                    if i in outputs:
                        back.append(i)
                elif not a.flags.writeable:
                    dev_args.append(self._stage_constant(a))
                else:
                    dev_args.append(_dev.upload(a))
            self._run_bound(program, config, self._bind(len(dev_args)), [_dev.as_bytes(d) for d in dev_args])
            for i in back:
                args[i].reshape(-1)[...] = _dev.download(dev_args[i]).reshape(-1)

    def _stage_constant(self, a: np.ndarray):
        """The device copy of a read-only host array, made once and dropped when the host array goes."""
        key = id(a)
        hit = self._staged.get(key)
        if hit is not None and hit[0]() is a:
            return hit[1]
        d = _dev.upload(a)
        self._staged[key] = (weakref.ref(a, lambda _r, k=key: self._staged.pop(k, None)), d)
        return d


# ---- registry, priority ------------------------------------------------------------------------

def _from_targets() -> dict[str, Backend]:
    """One tensor backend per registered kernel target, in the default priority order: gpu, cpu, any other
    target, the reference interpreter last (the slowest; it is for checking)."""
    classes = {cls.target: cls for cls in (GPUBackend, CPUBackend, ReferenceBackend)}
    made = [classes[t]() if t in classes else IsaBackend(t) for t in targets.names() if t not in targets.ELSEWHERE]
    first = ["gpu", "cpu"]
    made.sort(key=lambda b: (first.index(b.name) if b.name in first else len(first), b.name == "reference"))
    return {b.name: b for b in made}


_memo: dict = {}
_BACKENDS: dict[str, Backend] = _from_targets()
DEFAULT_PRIORITY = tuple(_BACKENDS)
_state = {"priority": list(DEFAULT_PRIORITY), "forced": None, "version": 0}


def _changed() -> None:
    """Selections are memoized per configuration; every change of it starts a new one."""
    _state["version"] += 1
    _memo.clear()
    for table in _small.values():
        table.clear()


# the small eager path's memo: op -> {dtype: entry}; the per-op tables live as long as the process (the tensor
# layer's operator methods hold them), and a change of configuration empties them
_small: dict[str, dict] = {}


def small_table(op: str) -> dict:
    """The memo of small_kernel for one operation, {dtype: entry or None}, read directly on the hot path."""
    return _small.setdefault(op, {})
SMALL_MAX_ELEMENTS = 1 << 16   # the small eager path's limit (one thread; the GPU thresholds are far above)


def small_kernel(op: str, dtype):
    """For one element-wise operation (a tensor op name with an ISA array operation) on small arrays of dtype:
    the cpu backend's loop for it, (fresh, op index, explain record), called as fresh(op, limit, a[, b]) on the
    operands' NumPy arrays for a new array, or None where they do not fit (isa.backends.cpu.arrays.direct_map), when
    automatic selection gives small element-wise work to the built-in cpu backend; else None. Memoized per
    configuration (cleared by every change of backends, priority or thresholds)."""
    table = small_table(op)
    try:
        return table[dtype]
    except KeyError:
        pass
    from eidos.isa import backends as isa_backends

    from . import dtypes as D
    from .lower import MAP1, MAP2

    found = None
    operation = MAP1.get(op) or MAP2.get(op)
    if operation is not None and (dtype in D.INTEGERS or dtype in (D.float32, D.float64)):
        try:
            sel = select_backend(None, OperationProperties("elementwise", 0))
        except UnsupportedError:
            sel = None
        b = _BACKENDS.get(sel.name) if sel is not None else None
        if type(b) is CPUBackend and isinstance(b.isa, isa_backends.CpuBackend):
            from eidos.isa.backends.cpu.arrays import direct_map

            found = direct_map(operation, D.isa_type(dtype), b.isa)
            if found is not None:
                what = "ParallelMapBinary" if op in MAP2 else "ParallelMap"
                found = (*found, (f"{op} ({dtype}): small eager path, no graph or program",
                                  f"{sel}; the cpu backend's {what} {operation.value} loop called directly on the "
                                  f"arrays (realized operands of one shape and dtype, <= {SMALL_MAX_ELEMENTS} elements)"))
    table[dtype] = found
    return found


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
    DEVICE_THRESHOLDS.update(_DEFAULT_DEVICE_THRESHOLDS)
    _changed()


@dataclass
class Selection:
    """The backend chosen for one program, why, and every backend passed over with its reason."""
    name: str
    rule: str
    rejected: list = field(default_factory=list)   # (name, reason)
    candidates: list = field(default_factory=list)  # the ones that may run it, in order
    copies: str = ""                                # host<->device copies made to run it there

    def __str__(self) -> str:
        dev = "gpu" if self.name in _BACKENDS and _is_device(self.name) else "cpu"
        out = f"backend: {self.name} ({self.rule}), device: {dev}"
        if self.copies:
            out += f"; {self.copies}"
        if self.rejected:
            out += "; rejected: " + ", ".join(f"{n} ({r})" for n, r in self.rejected)
        return out


def _rejection(name: str, b: Backend, op: OperationProperties, info, explicit: bool = False) -> str | None:
    caps = b.get_capabilities()
    device = caps.get("requires_gpu", False)
    if device and not explicit and op.device == "cpu":  # the cheap checks first: no torch import for small work
        if info is not None and info.gpu_count == 0:
            return "no GPU detected" + (" (Triton's interpreter runs only when asked: set_backend('gpu') or "
                                        ".to('gpu'))" if _dev.interpreted() else "")
        limit = THRESHOLDS.get(op.op_type, 0)
        if op.input_size_bytes < limit and not op.requires_gpu:
            if limit >= NEVER:
                return (f"GPU threshold for {op.op_type} on host inputs: never (the measured crossover: copies to "
                        "and from the device cost more than the CPU's pass at every size; .to('gpu') keeps data there)")
            return (f"{op.input_size_bytes} bytes < GPU threshold {limit} for {op.op_type} "
                    "(host inputs: copies to and from the device counted)")
    if not b.is_available():
        return b.unavailable_reason() or "unavailable"
    if op.op_type not in caps.get("operations", ()):
        return f"lacks {op.op_type}"
    if op.requires_gpu and not device:
        return "not a GPU backend"
    return None


def _is_device(name: str) -> bool:
    return bool(_BACKENDS[name].get_capabilities().get("requires_gpu", False))


def select_backend(backend_name: str | None, op_props: OperationProperties, device_info=None) -> Selection:
    """Choose the backend for one program (rules in this module's doc). `op_props.op_type` is a kind or an
    operation's name (operation_kind). Automatic selections are memoized per (operation kind, size class,
    inputs' device) until the configuration changes through this module's functions.

    >>> from eidos.tensor.backend import OperationProperties, select_backend
    >>> op = OperationProperties(op_type="elementwise_add", input_size_bytes=1024, requires_gpu=False)
    >>> sel = select_backend(backend_name="cpu", op_props=op)
    >>> sel.name, sel.rule
    ('cpu', 'explicit backend')
    >>> select_backend("cpu", OperationProperties("elementwise_addd", 1024))
    Traceback (most recent call last):
    eidos.errors.PlanError: unknown tensor operation 'elementwise_addd'; ...; did you mean 'elementwise_add'?
    """
    if op_props.op_type not in DEFAULT_THRESHOLDS:
        op_props = op_props._replace(op_type=operation_kind(op_props.op_type))
    if device_info is None and backend_name is None:
        big = op_props.input_size_bytes >= THRESHOLDS.get(op_props.op_type, 0)
        key = (op_props.op_type, big, op_props.requires_gpu, op_props.device, _state["version"])
        sel = _memo.get(key)
        if sel is None:
            if len(_memo) > 256:
                _memo.clear()
            sel = _memo[key] = _select(None, op_props, detect_devices())
        return sel  # shared: run() copies it before recording a fallback or copies
    return _select(backend_name, op_props, device_info if device_info is not None else detect_devices())


def _select(backend_name, op_props, info) -> Selection:
    forced = backend_name if backend_name is not None else _state["forced"]
    rejected: list = []
    order = [n for n in _state["priority"] if n in _BACKENDS]
    if op_props.device != "cpu":  # data on the device stays there: device backends first, host ones copy
        order.sort(key=lambda n: not _is_device(n))
    if forced is not None:
        b = get_backend(forced)
        why = _rejection(forced, b, op_props, None, explicit=True)
        if why is None:
            rest = [n for n in order if n != forced and _rejection(n, _BACKENDS[n], op_props, info) is None]
            return Selection(forced, "explicit backend", [], [forced, *rest])
        rejected.append((forced, why))
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
    if forced is not None:
        rule = f"explicit backend {forced!r} cannot run it, fell back by priority"
    elif op_props.device != "cpu":
        rule = (f"inputs on the {op_props.device}: runs where the data is" if _is_device(ok[0]) else
                f"priority order; inputs on the {op_props.device} are copied to the host and back")
    elif _is_device(ok[0]):
        rule = (f"priority order; {op_props.input_size_bytes} bytes >= GPU threshold "
                f"{THRESHOLDS.get(op_props.op_type, 0)} for {op_props.op_type} (host inputs: copies counted)")
    else:
        rule = "priority order"
    return Selection(ok[0], rule, rejected, ok)


def _copies(name: str, args, op_props: OperationProperties, outputs) -> str:
    """The host<->device copies running on `name` costs for data where it is ('' when none)."""
    dev = _is_device(name)
    if dev == (op_props.device != "cpu"):
        return ""
    out_bytes = 0
    for o in outputs if outputs is not None else ():
        out_bytes += args[o].nbytes
    there, back = ("host->device", "device->host") if dev else ("device->host", "host->device")
    return f"copies: {op_props.input_size_bytes} input bytes {there}, {out_bytes} output bytes {back}"


def _execute_on(b: Backend, program, args, config, outputs, scratch) -> None:
    if isinstance(b, GPUBackend):
        b.execute(program, args, config, outputs, scratch)
        return
    staged = None
    if not b.get_capabilities().get("requires_gpu", False):
        for a in args:
            if _dev.is_device_array(a):
                staged = [_dev.download(x) if _dev.is_device_array(x) else x for x in args]
                break
    if staged is None:
        if isinstance(b, IsaBackend):
            b.execute(program, args, config, outputs)
        else:
            b.execute(program, args, config)
        return
    if isinstance(b, IsaBackend):
        b.execute(program, staged, config, outputs)
    else:
        b.execute(program, staged, config)
    for o in outputs if outputs is not None else program.metadata.get("eidos.tensor.outputs", ()):
        _dev.copy_into(args[o], staged[o])


def run(program, args, config, op_props: OperationProperties, outputs=None, scratch=()) -> Selection:
    """Select, execute, and on UnsupportedError fall back to the next candidate (recorded and warned).
    `scratch`: slots whose contents are neither read before written nor wanted after (not copied)."""
    sel = select_backend(None, op_props)
    for i, name in enumerate(sel.candidates):
        try:
            _execute_on(_BACKENDS[name], program, args, config, outputs, scratch)
        except UnsupportedError as e:
            if i == 0:
                sel = Selection(sel.name, sel.rule, list(sel.rejected), list(sel.candidates))
            sel.rejected.append((name, f"raised UnsupportedError at run time: {e}"))
            if i + 1 < len(sel.candidates):
                warnings.warn(f"tensor backend {name!r} cannot run this {op_props.op_type} program ({e}); "
                              f"falling back to {sel.candidates[i + 1]!r}", FallbackWarning, stacklevel=4)
                continue
            raise
        copies = _copies(name, args, op_props, outputs)
        if name != sel.name or copies:
            sel = Selection(sel.name, sel.rule, list(sel.rejected), list(sel.candidates), copies)
        if name != sel.name:
            sel.name, sel.rule = name, "fallback after UnsupportedError"
        return sel
    raise UnsupportedError(f"no tensor backend ran {op_props.op_type}")


__all__ = ["Backend", "IsaBackend", "CPUBackend", "GPUBackend", "ReferenceBackend", "OperationProperties",
           "Selection", "select_backend", "register_backend", "unregister_backend", "get_backend", "backends",
           "set_backend", "set_backend_priority", "get_backend_priority", "set_threshold", "THRESHOLDS",
           "THRESHOLDS_PROVENANCE", "DEVICE_THRESHOLDS", "load_thresholds", "detect_devices", "reset",
           "OPERATIONS", "operation_kind", "operation_names"]
