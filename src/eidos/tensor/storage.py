"""Device storage for gpu tensors: torch tensors on the kernel backend's device, and the array work
the tensor layer does on them between programs.

A gpu tensor's data is a torch tensor on `torch_device()`: CUDA on a GPU; under Triton's
interpreter (TRITON_INTERPRET=1, no CUDA) a torch CPU tensor stands in for device memory, so the
same code runs and is tested on a CPU. torch is imported only here and only when a gpu tensor is
made. Host tensors keep NumPy arrays; `HOST` and `GPU` give both the same few functions
(`empty`, `full`, `layout`, `contiguous`, `copy`, `moveaxis`, `astype`), so realization code is written once.

Layout moves (reshape, transpose, slicing, broadcasting, concatenation) run on the device in torch,
on an integer view of the same width (a move copies bits; torch lacks many operations for
uint16..uint64 and bfloat16): data never leaves the device between programs.
"""

from __future__ import annotations

import functools
import math
import os
import sys

import numpy as np

from eidos.errors import BackendUnavailable, DeviceError, EidosError

from . import dtypes as D


def is_device_array(a) -> bool:
    """Whether a realized tensor's data lives on the device: a torch tensor. Recognised by what it is, not by
    what it is not: a NumPy scalar is host data (the tensor layer stores 0-d results as 0-d arrays, and the
    kernel targets take scalars as host bytes)."""
    if a.__class__ is np.ndarray:
        return False
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor)


@functools.cache
def _torch():
    try:
        import torch
    except ImportError as e:
        raise BackendUnavailable("gpu tensors need torch: pip install 'eidos[gpu]'") from e
    return torch


def interpreted() -> bool:
    """Triton's interpreter is on (TRITON_INTERPRET=1: the device is simulated on the CPU). The triton target's own
    answer once it is loaded; before, the same reading of the environment, so that choosing a backend for a
    process's first operation does not import that target (about 30 ms) just to word a rejection."""
    memory = sys.modules.get("eidos.isa.backends.triton.device_memory")
    if memory is not None:
        return memory.interpreting()
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "yes", "on")


_DEVICE: dict = {}


def remote():
    """eidos.remote.tensors: where 'remote:gpu' and 'remote:cpu' tensors' data lives (a service), imported when
    one is first used."""
    from eidos.remote import tensors

    return tensors


def torch_device():
    """The device gpu tensors live on: the Triton backend's (the CPU under TRITON_INTERPRET=1, else CUDA);
    BackendUnavailable naming why there is none."""
    key = interpreted()
    dev = _DEVICE.get(key)
    if dev is None:
        from eidos.isa.backends.triton.device_memory import default_device

        dev = _DEVICE[key] = default_device()
    return dev


def gpu_index() -> str | None:
    """The index of the CUDA device gpu tensors live on, as text; None where they live on none."""
    try:
        dev = torch_device()
    except BackendUnavailable:
        return None
    return str(dev.index) if dev.type == "cuda" and dev.index is not None else None


def describe() -> str:
    """Where 'gpu' is, in words, for explain and repr."""
    d = torch_device()
    if d.type == "cuda":
        return f"{d} ({_torch().cuda.get_device_name(d)})"
    return "cpu (Triton interpreter: torch CPU tensors stand in for device memory)"


# ---- dtypes ----------------------------------------------------------------------------------------

@functools.cache
def _dtype_maps():
    torch = _torch()
    pairs = [(D.bool_, torch.bool), (D.int8, torch.int8), (D.int16, torch.int16), (D.int32, torch.int32),
             (D.int64, torch.int64), (D.uint8, torch.uint8), (D.uint16, torch.uint16), (D.uint32, torch.uint32),
             (D.uint64, torch.uint64), (D.float16, torch.float16), (D.bfloat16, torch.bfloat16),
             (D.float32, torch.float32), (D.float64, torch.float64)]
    return dict(pairs), {t: n for n, t in pairs}


def torch_dtype(dt: np.dtype):
    try:
        return _dtype_maps()[0][dt]
    except KeyError:
        raise D.DTypeError(f"{dt} tensors stay on the host (the ISA has no complex arithmetic; docs/tensor.md); "
                           f"gpu dtypes: {', '.join(str(d) for d in _dtype_maps()[0])}") from None


def numpy_dtype(tdt) -> np.dtype:
    try:
        return _dtype_maps()[1][tdt]
    except KeyError:
        raise D.DTypeError(f"torch dtype {tdt} has no eidos gpu dtype (complex tensors live on the host); gpu "
                           f"dtypes: {', '.join(str(d) for d in _dtype_maps()[0])}") from None


_BITS = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def _bits(t):
    """t viewed as a signed integer of its width (every dtype's bits move the same way)."""
    return t.view(getattr(_torch(), _BITS[t.element_size()]))


# ---- transfers -------------------------------------------------------------------------------------

_MEMORY: dict = {}


def _copier():
    """The Triton target's DeviceMemory for this device: its host copies go through pinned staging buffers in
    chunks (the DMA overlaps the host memcpy), faster than a copy from pageable memory."""
    dev = torch_device()
    mem = _MEMORY.get(dev)
    if mem is None:
        from eidos.isa.backends.triton.device_memory import DeviceMemory

        mem = _MEMORY[dev] = DeviceMemory(dev)
    return mem


def upload(a: np.ndarray):
    """A device copy of a host array (its bytes move; the dtype is a view, so every dtype travels). Under the
    interpreter too it is a copy: a gpu tensor must not alias a host array."""
    torch = _torch()
    a = np.asarray(a)
    dt = torch_dtype(D.as_dtype(a.dtype))
    raw = torch.empty(a.nbytes, dtype=torch.uint8, device=torch_device())
    if a.nbytes:
        _copier().copy_in(raw, 0, a if a.flags.c_contiguous else a.copy(order="C"), "to('gpu')")
    return raw.view(dt).reshape(a.shape)


def download(t) -> np.ndarray:
    """A host NumPy copy of a device tensor (a fresh array; writes to it do not reach the device)."""
    out = np.empty(tuple(t.shape), dtype=numpy_dtype(t.dtype))
    if out.nbytes:
        _copier().copy_out(as_bytes(t.detach().contiguous()), 0, out, "to('cpu')")
    return out


def adopt(x):
    """A torch tensor from a DLPack producer whose memory is on the device, without a copy."""
    torch = _torch()
    t = x if isinstance(x, torch.Tensor) else torch.from_dlpack(x)
    dev = torch_device()
    if t.device != dev:
        raise DeviceError(f"from_dlpack: the tensor is on {t.device}, gpu tensors live on {dev}; "
                          f"move it there first (torch: .to({str(dev)!r}))")
    numpy_dtype(t.dtype)
    return t


def is_device_producer(x) -> bool:
    """Whether a DLPack producer's memory is on the device gpu tensors use (CUDA, or ROCm)."""
    dev = getattr(x, "__dlpack_device__", None)
    if dev is None:
        return False
    kind = int(dev()[0])
    return kind in (2, 10)  # kDLCUDA, kDLROCM (kDLCPU is 1, kDLCUDAHost 3: host memory)


# ---- array functions for realization: one set per storage ------------------------------------------

def _shape(shape) -> tuple:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)


class _Host:
    """NumPy: host tensors."""
    name = "cpu"

    @staticmethod
    def empty(shape, dtype):
        return np.empty(shape, dtype=dtype)

    @staticmethod
    def full(shape, value, dtype):
        return np.full(shape, value, dtype=dtype)

    @staticmethod
    def layout(arr, shape, perm=None):
        """arr broadcast to `shape`, axes permuted by `perm`, C-contiguous (arr itself when it already is)."""
        if perm is None and arr.shape == tuple(shape) and arr.flags.c_contiguous:
            return arr
        if arr.shape != tuple(shape):
            arr = np.broadcast_to(arr, shape)
        if perm is not None:
            arr = np.transpose(arr, perm)
        return _Host.contiguous(arr)

    @staticmethod
    def contiguous(arr, dtype=None):
        """arr C-contiguous (itself when it is); a 0-d array stays 0-d (np.ascontiguousarray gives 1-d)."""
        out = np.ascontiguousarray(arr, dtype=dtype)
        return out if out.ndim == arr.ndim else out.reshape(arr.shape)

    @staticmethod
    def copy(arr):
        return arr.copy()

    @staticmethod
    def moveaxis(arr, src, dst):
        return np.moveaxis(arr, src, dst)

    @staticmethod
    def broadcast_to(arr, shape):
        return np.broadcast_to(arr, shape)

    @staticmethod
    def astype(arr, dtype):
        return arr.astype(dtype)


class _Gpu:
    """torch on torch_device(): gpu tensors."""
    name = "gpu"

    @staticmethod
    def empty(shape, dtype):
        return _torch().empty(_shape(shape), dtype=torch_dtype(dtype), device=torch_device())

    @staticmethod
    def full(shape, value, dtype):
        torch = _torch()
        dt = D.as_dtype(dtype)
        if dt in (D.uint16, D.uint32, D.uint64):  # torch fills these only through a same-width view
            bits = np.asarray(value, dtype=dt).view(_BITS[dt.itemsize]).item()
            return torch.full(_shape(shape), bits, dtype=getattr(torch, _BITS[dt.itemsize]),
                              device=torch_device()).view(torch_dtype(dt))
        return torch.full(_shape(shape), value, dtype=torch_dtype(dt), device=torch_device())

    @staticmethod
    def layout(arr, shape, perm=None):
        shape = tuple(shape)
        if perm is None and tuple(arr.shape) == shape and arr.is_contiguous():
            return arr
        b = _bits(arr)
        if tuple(b.shape) != shape:
            b = b.broadcast_to(shape)
        if perm is not None:
            b = b.permute(*perm)
        return b.contiguous().view(arr.dtype)

    @staticmethod
    def contiguous(arr, dtype=None):
        if dtype is not None and torch_dtype(D.as_dtype(dtype)) != arr.dtype:
            arr = arr.to(torch_dtype(D.as_dtype(dtype)))
        return arr.contiguous()

    @staticmethod
    def copy(arr):
        return arr.clone()

    @staticmethod
    def moveaxis(arr, src, dst):
        return arr.movedim(src, dst)

    @staticmethod
    def broadcast_to(arr, shape):
        return _bits(arr).broadcast_to(tuple(shape)).view(arr.dtype)

    @staticmethod
    def astype(arr, dtype):
        return arr.to(torch_dtype(D.as_dtype(dtype)))


HOST, GPU = _Host(), _Gpu()


def shares(a, b) -> bool:
    """Whether two arrays of one device may share memory (False positives possible: then a needless copy)."""
    if a.__class__ is np.ndarray:
        return b.__class__ is np.ndarray and np.may_share_memory(a, b)
    return is_device_array(a) and is_device_array(b) and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def storage(device: str):
    """The array functions for tensors on `device` ('cpu' or 'gpu')."""
    return HOST if device == "cpu" else GPU


# ---- layout moves on the device --------------------------------------------------------------------

def move(name: str, param, shape: tuple, arrays: list):
    """The device form of a layout move (the host form is the NumPy function recorded with it)."""
    torch = _torch()
    a = arrays[0]
    dtype = a.dtype
    if name in ("reshape", "squeeze", "expand_dims"):
        out = _bits(a).reshape(shape)
    elif name == "transpose":
        out = _bits(a).permute(*param)
    elif name == "expand":
        out = _bits(a).broadcast_to(shape)
    elif name == "concat":
        out = torch.cat([_bits(x) for x in arrays], dim=param)
    elif name == "getitem":
        out = _index(_bits(a), param, shape)
    else:
        raise EidosError(f"internal: no device form for the layout move {name!r}")
    return out.view(dtype)


def _simple_key(key) -> bool:
    """Keys torch indexes exactly as NumPy does: ints, slices with a positive step, None, Ellipsis."""
    parts = key if isinstance(key, tuple) else (key,)
    for k in parts:
        if isinstance(k, slice):
            if k.step is not None and k.step <= 0:
                return False
        elif not (k is None or k is Ellipsis or (isinstance(k, (int, np.integer)) and not isinstance(k, bool))):
            return False
    return True


def _index(b, key, shape):
    """NumPy indexing on a device tensor: basic keys as torch views; any other key (negative steps,
    integer arrays, boolean masks) as a gather by the flat positions NumPy computes on the host."""
    if _simple_key(key):
        return b[key]
    torch = _torch()
    pos = np.arange(math.prod(b.shape), dtype=np.int64).reshape(tuple(b.shape))[key]
    idx = torch.from_numpy(np.ascontiguousarray(pos).reshape(-1)).to(b.device)
    return b.reshape(-1).index_select(0, idx).reshape(shape)


def setitem(a, key, value) -> None:
    """a[key] = value on the device (value: a scalar, a host array or a device tensor of a's device)."""
    torch = _torch()
    pos = np.arange(math.prod(a.shape), dtype=np.int64).reshape(tuple(a.shape))[key]
    idx = torch.from_numpy(np.ascontiguousarray(pos).reshape(-1)).to(a.device)
    if isinstance(value, np.ndarray) or not hasattr(value, "device"):
        value = np.asarray(value, dtype=numpy_dtype(a.dtype))
        src = upload(np.ascontiguousarray(np.broadcast_to(value, pos.shape)))
    else:
        src = GPU.broadcast_to(value.to(a.dtype) if value.dtype != a.dtype else value, pos.shape)
    flat = _bits(a).view(-1)
    flat.index_copy_(0, idx, _bits(src.contiguous()).reshape(-1))


def as_bytes(t):
    """A contiguous device tensor's memory as a flat uint8 tensor (how kernel targets hold buffers)."""
    return t.reshape(-1).view(_torch().uint8)


def copy_into(dst, src: np.ndarray) -> None:
    """Write a host array's values into a contiguous device tensor of the same size and dtype."""
    _bits(dst).reshape(-1).copy_(_bits(upload(src)).reshape(-1))
