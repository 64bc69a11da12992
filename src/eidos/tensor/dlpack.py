"""bfloat16 across DLPack on the host: NumPy's DLPack has no bfloat16 (its import fails with a bare "Unsupported
dtype in DLTensor", its export has no code for ml_dtypes' type), so eidos moves bfloat16 as uint16 and rewrites
the dtype field of the capsule (kDLUInt 16 <-> kDLBfloat 16): the memory is shared, as for any other dtype.
"""

from __future__ import annotations

import ctypes

import numpy as np

from eidos.errors import DTypeError

from . import dtypes as D

_NAME = ctypes.pythonapi.PyCapsule_GetName
_NAME.restype, _NAME.argtypes = ctypes.c_char_p, [ctypes.py_object]
_POINTER = ctypes.pythonapi.PyCapsule_GetPointer
_POINTER.restype, _POINTER.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_UINT, _BFLOAT = 1, 4   # DLDataTypeCode: kDLUInt, kDLBfloat
_CODES = {0: "int", 1: "uint", 2: "float", 3: "opaque handle", 4: "bfloat", 5: "complex", 6: "bool"}


def _dtype_field(capsule) -> int:
    """The address of the capsule's DLTensor dtype (code, bits, lanes): DLManagedTensor starts with the DLTensor;
    DLManagedTensorVersioned with its version, manager_ctx, deleter and flags (32 bytes) first. In the DLTensor:
    data pointer (8), device (8), ndim (4), then dtype."""
    name = _NAME(capsule)
    if name not in (b"dltensor", b"dltensor_versioned"):
        raise DTypeError(f"from_dlpack: the producer gave a capsule named {name!r}, not a DLPack tensor")
    return _POINTER(capsule, name) + (0 if name == b"dltensor" else 32) + 20


class _Capsule:
    """Hands NumPy one capsule already made."""

    def __init__(self, capsule, device) -> None:
        self.capsule, self.device = capsule, device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def host_array(x) -> np.ndarray:
    """np.from_dlpack(x), and bfloat16 too (shared memory); DTypeError names a DLPack dtype eidos lacks."""
    try:
        return np.from_dlpack(x)
    except (BufferError, RuntimeError, TypeError) as e:
        error = e
    capsule = x.__dlpack__()
    field = _dtype_field(capsule)
    code, bits = ctypes.c_uint8.from_address(field).value, ctypes.c_uint8.from_address(field + 1).value
    if (code, bits) != (_BFLOAT, 16):
        raise DTypeError(f"from_dlpack: NumPy cannot take the producer's data (DLPack dtype {_CODES.get(code, code)}"
                         f"{bits}): {error}; dtypes: {', '.join(D.NAMES)}") from error
    ctypes.c_uint8.from_address(field).value = _UINT
    return np.from_dlpack(_Capsule(capsule, x.__dlpack_device__())).view(D.bfloat16)


def bfloat16_capsule(a: np.ndarray, **kw):
    """A DLPack capsule of a bfloat16 array (its memory shared): NumPy's capsule of the uint16 view, marked
    kDLBfloat."""
    capsule = a.view(np.uint16).__dlpack__(**kw)
    ctypes.c_uint8.from_address(_dtype_field(capsule)).value = _BFLOAT
    return capsule
