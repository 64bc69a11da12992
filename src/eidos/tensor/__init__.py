"""eidos.tensor: the Tensor API (the corepy layer) and its op dispatcher, built on eidos.isa.

`ei.tensor` is both this package and the constructor: the module is callable, so
`ei.tensor([1, 2, 3])` makes a tensor and `ei.tensor.explain(t)` explains one. The rooms:
array.py (the Tensor class, construction), ops.py (the operations), realization.py (fusion, dispatch,
explain), lower.py (kernels to ISA programs), shapes.py, dtypes.py, complex.py, storage.py, backend.py.
"""

from __future__ import annotations

import sys
import types

from eidos.errors import AxisError, DTypeError, ShapeError

from . import backend, dtypes
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


class _CallableModule(types.ModuleType):
    def __call__(self, data, dtype=None, device=None, *, copy=None):
        return _make(data, dtype=dtype, device=device, copy=copy)


sys.modules[__name__].__class__ = _CallableModule
tensor = sys.modules[__name__]  # `from eidos.tensor import tensor` and eidos's lazy table give the callable module
