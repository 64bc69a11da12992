"""Lazy, fused n-dimensional arrays (eidos.Tensor) over the Atlas ISA: `ei.tensor(data)` makes one.

`ei.tensor` is both the constructor and this namespace: `ei.tensor([1, 2, 3], dtype="float32", device="gpu")`
makes a tensor, `ei.tensor.sum(t)`, `ei.tensor.explain(t)` and the rest below work on them. Operations record a
graph that runs as fused ISA programs when a value is needed (`with ei.eager():` runs each at once).
NumPy's functions take tensors (`np.sum(t)`), NumPy's and torch's names are here too (`concatenate`, `cat`,
`power`, `arccos`, ...), and Tensor has torch's methods (`.float()`, `.view()`, `add_`, `dim=`). The guide
is docs/tensor.md; the standard's namespace is eidos.array_api.
"""

from __future__ import annotations

import sys
import types

from eidos.errors import AxisError, DTypeError, ShapeError

from . import array, backend, dtypes, ops, realization, shapes
from .array import *  # noqa: F403
from .array import tensor as _make
from .backend import (
    Backend,
    OperationProperties,
    get_backend_priority,
    register_backend,
    select_backend,
    set_backend,
    set_backend_priority,
    set_threshold,
)
from .dtypes import (
    bfloat16,
    bool_,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .lower import CACHE as lowering_cache
from .ops import *  # noqa: F403
from .realization import *  # noqa: F403
from .shapes import *  # noqa: F403

# what help(ei.tensor) and `from eidos.tensor import *` show: the public names, not the rooms' internals
__all__ = sorted({*array.__all__, *ops.__all__, *realization.__all__, *shapes.__all__} - {"tensor"}) + [
    "Backend", "OperationProperties", "get_backend_priority", "register_backend", "select_backend", "set_backend",
    "set_backend_priority", "set_threshold", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64", "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]


class _CallableModule(types.ModuleType):
    def __call__(self, data, dtype=None, device=None, *, copy=None):
        return _make(data, dtype=dtype, device=device, copy=copy)


sys.modules[__name__].__class__ = _CallableModule
tensor = sys.modules[__name__]  # `from eidos.tensor import tensor` and eidos's lazy table give the callable module
