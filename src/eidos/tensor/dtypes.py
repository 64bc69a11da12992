"""Tensor dtypes: NumPy dtype objects (bfloat16 from ml_dtypes), each real one with its ISA Type.

bool is stored as one byte (U8, 0 or 1) in ISA programs. complex64 and complex128 have no ISA type:
the ISA has no complex arithmetic, so complex operations run on the host (eidos/tensor/complex.py).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from eidos.errors import DTypeError
from eidos.isa.types import Type

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(f"int{b}") for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (np.dtype(f"uint{b}") for b in (8, 16, 32, 64))
float16, float32, float64 = (np.dtype(f"float{b}") for b in (16, 32, 64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

DTYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64,
          complex64, complex128)
NAMES = {"bool": bool_, **{str(d): d for d in DTYPES}}
NAME = {d: str(d) for d in DTYPES}
FLOATS = frozenset({float16, bfloat16, float32, float64})
SIGNED = frozenset({int8, int16, int32, int64})
UNSIGNED = frozenset({uint8, uint16, uint32, uint64})
INTEGERS = SIGNED | UNSIGNED
COMPLEX = frozenset({complex64, complex128})
INEXACT = FLOATS | COMPLEX
REAL_OF = {complex64: float32, complex128: float64}   # a complex dtype's component dtype
COMPLEX_OF = {float16: complex64, bfloat16: complex64, float32: complex64, float64: complex128}

_ISA = {bool_: Type.U8, int8: Type.I8, int16: Type.I16, int32: Type.I32, int64: Type.I64, uint8: Type.U8,
        uint16: Type.U16, uint32: Type.U32, uint64: Type.U64, float16: Type.F16, bfloat16: Type.BF16,
        float32: Type.F32, float64: Type.F64}


def as_dtype(d) -> np.dtype:
    """str, numpy dtype or type -> one of DTYPES; DTypeError names the choices."""
    if d is bool:
        return bool_
    if d is int:
        return int64
    if d is float:
        return float64
    if d is complex:
        return complex128
    if type(d).__name__ == "dtype" and type(d).__module__ == "torch":   # torch.float32 -> float32
        d = str(d).removeprefix("torch.")
    try:
        dt = NAMES[d] if isinstance(d, str) and d in NAMES else np.dtype(d)
    except TypeError:
        dt = None
    if dt not in _ISA and dt not in COMPLEX:
        raise DTypeError(f"dtype {d!r} is not supported; dtypes: {', '.join(NAMES)}")
    return dt


def isa_type(d: np.dtype) -> Type:
    try:
        return _ISA[d]
    except KeyError:
        raise DTypeError(f"{d} has no ISA type (the ISA has no complex arithmetic; complex operations run on the "
                         "host)") from None


def is_float(d) -> bool:
    return d in FLOATS


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """The result dtype of a binary operation on two tensors (NumPy's table; bfloat16 with float16 gives float32)."""
    if a == b:
        return a
    if {a, b} == {bfloat16, float16}:
        return float32
    if bfloat16 in (a, b):  # ml_dtypes has no promotion to complex
        other = b if a == bfloat16 else a
        if other in COMPLEX:
            return other
    try:
        return as_dtype(np.result_type(a, b))
    except Exception as e:
        raise DTypeError(f"no common dtype for {a} and {b}") from e


def scalar_dtype(value, other: np.dtype) -> np.dtype:
    """A Python scalar's dtype next to a tensor of dtype `other` (NumPy 2 / Array API: weak scalars)."""
    if isinstance(value, (bool, np.bool_)):
        return other
    if isinstance(value, (int, np.integer)):
        return other if other != bool_ else int64
    if isinstance(value, (float, np.floating)):
        return other if other in INEXACT else float64
    if isinstance(value, (complex, np.complexfloating)):
        return other if other in COMPLEX else COMPLEX_OF.get(other, complex128)
    raise DTypeError(f"cannot combine a tensor with {type(value).__name__} {value!r}")
