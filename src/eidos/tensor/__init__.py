"""eidos.tensor: the Tensor API (the corepy layer) and its op dispatcher, built on eidos.isa.

`ei.tensor` is both this package and the constructor: the module is callable, so
`ei.tensor([1, 2, 3])` makes a tensor and `ei.tensor.explain(t)` explains one.
"""

from __future__ import annotations

import sys
import types

from . import backend, dtypes
from .backend import (Backend, OperationProperties, get_backend_priority, register_backend, select_backend,
                      set_backend, set_backend_priority, set_threshold)
from .dtypes import (DTypeError, bfloat16, bool_, complex64, complex128, float16, float32, float64, int8, int16,
                     int32, int64, uint8, uint16, uint32, uint64)
from .lower import CACHE as lowering_cache
from .tensor import *  # noqa: F403
from .tensor import (AxisError, ShapeError, Tensor, eager, explain, from_dlpack, is_eager, programs_executed,
                     realize)
from .tensor import tensor as _make


class _CallableModule(types.ModuleType):
    def __call__(self, data, dtype=None, device=None):
        return _make(data, dtype=dtype, device=device)


sys.modules[__name__].__class__ = _CallableModule
tensor = sys.modules[__name__]  # `from eidos.tensor import tensor` and eidos's lazy table give the callable module
