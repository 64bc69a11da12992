"""The ISA's value types: what a register or memory element holds and how wide it is."""

from __future__ import annotations

import enum
from functools import cached_property

import numpy as np


class Type(enum.Enum):
    """An element type. Integers wrap at their width; extended integers (I128..U4096) are exact."""

    F16 = "F16"
    BF16 = "BF16"
    F32 = "F32"
    F64 = "F64"
    I8 = "I8"
    I16 = "I16"
    I32 = "I32"
    I64 = "I64"
    I128 = "I128"
    I256 = "I256"
    I512 = "I512"
    I1024 = "I1024"
    I2048 = "I2048"
    I4096 = "I4096"
    U8 = "U8"
    U16 = "U16"
    U32 = "U32"
    U64 = "U64"
    U128 = "U128"
    U256 = "U256"
    U512 = "U512"
    U1024 = "U1024"
    U2048 = "U2048"
    U4096 = "U4096"

    @cached_property
    def bits(self) -> int:
        return 16 if self is Type.BF16 else int(self.value[1:])

    @property
    def size_bytes(self) -> int:
        return self.bits // 8

    @property
    def is_float(self) -> bool:
        return self.value[0] in "FB"

    @property
    def is_integer(self) -> bool:
        return not self.is_float

    @property
    def is_signed(self) -> bool:
        """Floats count as signed, as in the spec: they carry a sign."""
        return self.value[0] != "U"

    @property
    def is_unsigned(self) -> bool:
        return self.value[0] == "U"

    @property
    def is_extended(self) -> bool:
        """Integers wider than 64 bits: no NumPy dtype, exact arithmetic on Python ints."""
        return self.is_integer and self.bits > 64

    @cached_property
    def min_value(self) -> int | float:
        if self.is_float:
            return -float("inf")
        return -(1 << (self.bits - 1)) if self.is_signed else 0

    @cached_property
    def max_value(self) -> int | float:
        if self.is_float:
            return float("inf")
        return (1 << (self.bits - 1)) - 1 if self.is_signed else (1 << self.bits) - 1

    @cached_property
    def np_dtype(self) -> np.dtype:
        """The NumPy dtype of one element (BF16 from ml_dtypes); IsaError-free ValueError for extended ints."""
        if self is Type.BF16:
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        if self.is_extended:
            raise ValueError(f"{self.name} has no NumPy dtype")
        kind = {"F": "f", "I": "i", "U": "u"}[self.value[0]]
        return np.dtype(f"<{kind}{self.size_bytes}")

    @classmethod
    def parse(cls, name: str | Type) -> Type:
        """'f32', 'F32' or Type.F32 -> Type.F32; a ValueError names the choices."""
        if isinstance(name, Type):
            return name
        try:
            return cls[str(name).upper()]
        except KeyError:
            raise ValueError(f"unknown type {name!r}; types: {', '.join(t.name for t in cls)}") from None

    def __repr__(self) -> str:
        return f"Type.{self.name}"

    def __str__(self) -> str:
        return self.name


FLOAT_TYPES = tuple(t for t in Type if t.is_float)
INTEGER_TYPES = tuple(t for t in Type if t.is_integer)
NUMPY_TYPES = tuple(t for t in Type if not t.is_extended)
