"""The Tensor class (an n-dimensional array that is also a node of a lazy graph) and the ways to make one.

A tensor made from data is a leaf holding a NumPy array (host) or a torch tensor (gpu; see storage.py).
One made by an operation (ops.py) holds its operation and operands until a value is needed; realization.py
then runs it. The examples in these docstrings assume `import eidos as ei`, `import numpy as np` and
np.set_printoptions(precision=4) (tests/tensor/test_docs.py runs them so).
"""

from __future__ import annotations

import math
import operator
import weakref

import numpy as np

from eidos.errors import AxisError, BackendUnavailable, DeviceError, DTypeError, ShapeError

from . import backend as _backend
from . import dlpack as _dlpack
from . import dtypes as D
from . import storage as _dev

__all__ = ["Tensor", "tensor", "from_dlpack", "host_result", "zeros", "ones", "full", "arange", "rand", "randn"]


class Const:
    """A Python scalar in a graph, with the dtype it takes next to its tensor operand."""
    __slots__ = ("value", "dtype")

    def __init__(self, value, dtype) -> None:
        self.value, self.dtype = value, dtype

    shape = ()


class Tensor:
    """An n-dimensional array: lazy by default (operations record a graph, run as fused ISA programs when a
    value is needed; `with ei.eager():` runs each at once).

    >>> t = ei.tensor([1.0, 2.0]) * 2 + 1
    >>> t.is_realized, t
    (False, Tensor([3., 5.], dtype=float64, device='cpu'))
    """

    __slots__ = {
        "shape": "The size of each dimension, a tuple.\n\n>>> ei.tensor([[1, 2, 3]]).shape\n(1, 3)\n",
        "dtype": "The element type, a NumPy dtype.\n\n>>> ei.tensor([1.0], dtype='float32').dtype\ndtype('float32')\n",
        "device": "Where the data lives (or will): 'cpu' (NumPy), 'gpu' (torch; storage.py), or 'remote:gpu' "
                  "and 'remote:cpu' (on an eidos service; eidos.remote.tensors).\n\n"
                  ">>> ei.tensor([1]).device\n'cpu'\n",
        "_data": "", "_op": "", "_args": "", "_attrs": "", "_runs": "", "_readers": "", "__weakref__": ""}
    __array_priority__ = 100

    def __init__(self, data=None, *, _shape=None, _dtype=None, _op="leaf", _args=(), _attrs=None,
                 _device="cpu") -> None:
        if _op == "leaf" and _device == "cpu":
            arr = np.asarray(data)
            self.shape, self.dtype = tuple(arr.shape), D.as_dtype(arr.dtype)
            self._data = arr
        elif _op == "leaf":  # a torch tensor on the device (eidos.tensor.storage)
            self.shape, self.dtype, self._data = tuple(data.shape), _dev.numpy_dtype(data.dtype), data
        else:
            self.shape, self.dtype, self._data = tuple(_shape), _dtype, None
        self.device = _device
        self._op, self._args, self._attrs = _op, tuple(_args), _attrs
        self._runs: list = []
        self._readers = None   # weak references to the tensors that read this one's value later (see _before_write)

    # ---- basic properties ---------------------------------------------------------------

    @property
    def ndim(self) -> int:
        """The number of dimensions.

        >>> ei.tensor([[1, 2], [3, 4]]).ndim
        2
        """
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements.

        >>> ei.tensor([[1, 2], [3, 4]]).size
        4
        """
        return math.prod(self.shape)

    @property
    def is_realized(self) -> bool:
        """Whether the values exist yet (False for an operation's result until something needs it).

        >>> t = ei.tensor([1, 2]) + 1
        >>> t.is_realized, t.realize().is_realized
        (False, True)
        """
        return self._data is not None

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- realization ---------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The values as a NumPy array (realizing the graph; shares memory with a host tensor, a copy of
        a gpu tensor's device data).

        >>> (ei.tensor([1, 2]) * 3).numpy()
        array([3, 6])
        """
        return _host(self)

    def __array__(self, dtype=None, copy=None):
        if copy is False and self.device != "cpu":
            raise ValueError("a gpu tensor's values reach NumPy only through a copy to host memory (copy=False asked "
                             "for none); use .numpy() or .to('cpu')")
        a = _host(self)
        if dtype is not None:
            a = a.astype(dtype)
        return a.copy() if copy else a

    def realize(self) -> Tensor:
        """Run the graph behind this tensor now (its fused programs); the tensor itself.

        >>> (ei.tensor([1.0]) + 1).realize().is_realized
        True
        """
        _realize(self)
        return self

    def item(self):
        """The one element as a Python scalar.

        >>> ei.tensor([[2.5]]).item()
        2.5
        """
        if self.size != 1:
            raise ShapeError(f"item(): the tensor has shape {self.shape}, not one element")
        return _host(self).reshape(()).item()

    def tolist(self):
        """The values as nested Python lists.

        >>> ei.tensor([[1, 2], [3, 4]]).tolist()
        [[1, 2], [3, 4]]
        """
        return _host(self).tolist()

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ShapeError(f"the truth value of a tensor of shape {self.shape} is ambiguous; use .any() or .all()")
        return bool(_host(self).reshape(()))

    def __int__(self) -> int:
        return int(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __index__(self) -> int:
        if self.dtype not in D.INTEGERS or self.ndim:
            raise TypeError(f"only 0-d integer tensors can be used as an index, not {self.dtype} of shape {self.shape}")
        return int(self.item())

    def __repr__(self) -> str:
        a = _host(self)
        body = np.array2string(a, separator=", ", prefix="Tensor(")
        return f"Tensor({body}, dtype={self.dtype}, device={self.device!r})"

    __str__ = __repr__

    def _repr_html_(self) -> str:
        """What a notebook shows: shape, dtype and device, then the values (computed, as repr computes them)."""
        from eidos import html

        body = np.array2string(_host(self), separator=", ", threshold=200)
        return html.box("eidos Tensor", f"shape {self.shape}, {self.dtype}, on {self.device}", html.text(body))

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # ---- DLPack and devices ------------------------------------------------------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        a = _realize(self)
        if self.device[0] == "r":
            raise DeviceError(f"a {self.device} tensor's data is on a service, which DLPack cannot reach; .to('cpu') "
                              "first")
        if self.device != "cpu":  # torch exports the device memory (and orders `stream` after its own)
            kw = {"max_version": max_version, "dl_device": dl_device, "copy": copy}
            return a.__dlpack__(stream=-1 if stream is None else stream, **{k: v for k, v in kw.items() if v is not None})
        kw = {}
        if max_version is not None:
            kw["max_version"] = max_version
        if copy is not None:
            kw["copy"] = copy
        if dl_device is not None:
            kw["dl_device"] = dl_device
        export = (lambda **k: _dlpack.bfloat16_capsule(a, **k)) if self.dtype == D.bfloat16 else a.__dlpack__
        try:
            return export(stream=stream, **kw)
        except TypeError:
            return export(stream=stream)

    def __dlpack_device__(self):
        if self.device[0] == "r":
            raise DeviceError(f"a {self.device} tensor's data is on a service, which DLPack cannot reach; .to('cpu') "
                              "first")
        if self.device != "cpu":
            return _realize(self).__dlpack_device__()
        return (1, 0)  # kDLCPU

    def to(self, device=None, dtype=None, *, copy=False, non_blocking=False) -> Tensor:
        """The tensor on `device`: 'cpu' (host, NumPy), 'gpu' ('cuda', 'cuda:0': the gpu backend's device), or
        'remote:gpu' / 'remote:cpu' (the service of eidos.remote.current(): its accelerator, or its host).
        Realizes the graph where it is, then copies the data once; the same tensor if it is already there.
        As torch's: `.to(dtype)`, `.to(device, dtype)`, `.to(other_tensor)` (its device and dtype), dtypes as
        eidos, NumPy or torch name them; copy=True always gives a new tensor.

        >>> t = ei.tensor([1.0, 2.0])
        >>> t.to("cpu") is t, t.to("float32").dtype, t.to("cpu", "int8").dtype
        (True, dtype('float32'), dtype('int8'))
        """
        if isinstance(device, Tensor):
            device, dtype = device.device, device.dtype
        elif device is not None and dtype is None and _is_dtype(device):
            device, dtype = None, device
        t = self if dtype is None else ops.astype(self, dtype)
        if device is not None:
            t = t._to_device(device)
        return ops._clone(t) if copy and t is self else t

    def _to_device(self, device) -> Tensor:
        name = _device_name(device)
        if name == self.device:
            return self
        if name[0] == "r" or self.device[0] == "r":   # to or from a service
            return _dev.remote().move(self, name)
        if name == "gpu":
            gpu = _backend.get_backend("gpu")
            if not gpu.is_available():
                raise BackendUnavailable(f"cannot move a tensor to {device!r}: {gpu.unavailable_reason()}")
            out = Tensor(_dev.upload(_realize(self)), _device="gpu")
            out._runs.append(("to('gpu')", f"host -> device copy, {self.size * self.dtype.itemsize} bytes"))
            return out
        out = Tensor(_dev.download(_realize(self)))
        out._runs.append(("to('cpu')", f"device -> host copy, {self.size * self.dtype.itemsize} bytes"))
        return out

    def cpu(self) -> Tensor:
        """The tensor in host memory: .to('cpu').

        >>> ei.tensor([1, 2]).cpu().device
        'cpu'
        """
        return self.to("cpu")

    def to_device(self, device, /, *, stream=None) -> Tensor:
        """The Array API's name for .to(device).

        >>> ei.tensor([1, 2]).to_device("cpu").device
        'cpu'
        """
        return self.to(device)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's ufuncs on tensors (`np.exp(t)`, `np.add(t, 1, out=t)`): eidos operations by table, lazily;
        what eidos lacks runs as NumPy on the values and says so in explain() (eidos/tensor/protocols.py).

        >>> t = np.exp(ei.tensor([0.0, 1.0]))
        >>> t.is_realized, t
        (False, Tensor([1.    , 2.7183], dtype=float64, device='cpu'))
        """
        return _protocols.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        """NumPy's functions on tensors (`np.sum(t)`, `np.concatenate([t, t])`): eidos operations by table,
        lazily; the others run as NumPy on the values and say so in explain() (eidos/tensor/protocols.py).

        >>> np.concatenate([ei.tensor([1, 2]), ei.tensor([3])])
        Tensor([1, 2, 3], dtype=int64, device='cpu')
        >>> print(ei.tensor.explain(np.median(ei.tensor([1.0, 5.0, 2.0]))))
        Tensor shape=() dtype=float64 device='cpu' (realized)
          ran: host NumPy np.median (eidos has no median)
               cpu
        """
        return _protocols.array_function(func, types, args, kwargs)

    def __array_namespace__(self, *, api_version=None):
        if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
            raise ValueError(f"unsupported Array API version {api_version!r}")
        import eidos.array_api as xp

        return xp

    # ---- operators ---------------------------------------------------------------------------
    # + - * (and / on floats) are ops.py's small eager path, set there (ops._eager_binary)
    def __radd__(self, o): return ops._binary("add", o, self)
    def __rsub__(self, o): return ops._binary("sub", o, self)
    def __rmul__(self, o): return ops._binary("mul", o, self)
    def __rtruediv__(self, o): return ops.divide(o, self)
    def __floordiv__(self, o): return ops._binary("floordiv", self, o)
    def __rfloordiv__(self, o): return ops._binary("floordiv", o, self)
    def __mod__(self, o): return ops._binary("mod", self, o)
    def __rmod__(self, o): return ops._binary("mod", o, self)
    def __pow__(self, o): return ops.pow(self, o)
    def __rpow__(self, o): return ops.pow(o, self)
    def __matmul__(self, o): return ops.matmul(self, o)
    def __rmatmul__(self, o): return ops.matmul(o, self)
    def __and__(self, o): return ops._bitwise("and", self, o)
    def __rand__(self, o): return ops._bitwise("and", o, self)
    def __or__(self, o): return ops._bitwise("or", self, o)
    def __ror__(self, o): return ops._bitwise("or", o, self)
    def __xor__(self, o): return ops._bitwise("xor", self, o)
    def __rxor__(self, o): return ops._bitwise("xor", o, self)
    def __lshift__(self, o): return ops._bitwise("lshift", self, o)
    def __rlshift__(self, o): return ops._bitwise("lshift", o, self)
    def __rshift__(self, o): return ops._bitwise("rshift", self, o)
    def __rrshift__(self, o): return ops._bitwise("rshift", o, self)
    def __eq__(self, o): return ops._binary("eq", self, o, D.bool_)
    def __ne__(self, o): return ops._binary("ne", self, o, D.bool_)
    def __lt__(self, o): return ops._binary("lt", self, o, D.bool_)
    def __le__(self, o): return ops._binary("le", self, o, D.bool_)
    def __gt__(self, o): return ops._binary("gt", self, o, D.bool_)
    def __ge__(self, o): return ops._binary("ge", self, o, D.bool_)
    def __neg__(self): return ops.negative(self)
    def __pos__(self): return self
    def __abs__(self): return ops.abs(self)
    def __invert__(self): return ops.bitwise_invert(self)
    __hash__ = None  # type: ignore[assignment]

    # in place: t[key] = v and t += v write t's memory (t += v on a t not yet run: t becomes the lazy node t + v).
    # Either way a graph that read t before keeps t's value as it was then (_before_write, _assign).
    def __setitem__(self, key, value):
        if self.dtype not in D.COMPLEX and (isinstance(value, (complex, np.complexfloating)) or (
                isinstance(value, Tensor) and value.dtype in D.COMPLEX)):
            raise DTypeError(f"setitem: a complex value into a {self.dtype} tensor would drop its imaginary part; "
                             "assign real(value) or make the tensor complex")
        if isinstance(value, Tensor) and value.device != self.device:
            raise _mixed("setitem", [self, value])
        if self.device[0] == "r":
            raise DeviceError(f"setitem: a {self.device} tensor's data is on a service and is not written in place; "
                              "compute the new value with where() or on .to('cpu')")
        k = _index_key(key)
        if isinstance(value, Tensor):
            _realize(value)
        _realize(self)
        _before_write(self)  # after the key and value ran: graphs of them that read self need no copy of it
        a = self._data
        v = value._data if isinstance(value, Tensor) else value
        if self.device != "cpu":
            if not a.is_contiguous():
                a = self._data = a.contiguous()
            try:
                np.empty(self.shape, dtype=np.bool_)[k]
            except IndexError as e:
                raise AxisError(f"setitem on a tensor of shape {self.shape}: {e}") from e
            try:
                _dev.setitem(a, k, v)
            except (RuntimeError, ValueError) as e:
                raise ShapeError(f"setitem on a tensor of shape {self.shape}: {e}") from e
            self._runs.append(("setitem", "device (torch index_copy_)"))
            return
        if not a.flags.writeable:
            a = self._data = a.copy()
        try:
            a[k] = v
        except (IndexError, ValueError) as e:
            raise ShapeError(f"setitem on a tensor of shape {self.shape}: {e}") from e
        self._runs.append(("setitem", "host (NumPy)"))

    def __iadd__(self, o): return _inplace(self, "+=", operator.add, o)
    def __isub__(self, o): return _inplace(self, "-=", operator.sub, o)
    def __imul__(self, o): return _inplace(self, "*=", operator.mul, o)
    def __itruediv__(self, o): return _inplace(self, "/=", operator.truediv, o)
    def __ifloordiv__(self, o): return _inplace(self, "//=", operator.floordiv, o)
    def __imod__(self, o): return _inplace(self, "%=", operator.mod, o)
    def __ipow__(self, o): return _inplace(self, "**=", operator.pow, o)
    def __imatmul__(self, o): return _inplace(self, "@=", operator.matmul, o)
    def __iand__(self, o): return _inplace(self, "&=", operator.and_, o)
    def __ior__(self, o): return _inplace(self, "|=", operator.or_, o)
    def __ixor__(self, o): return _inplace(self, "^=", operator.xor, o)
    def __ilshift__(self, o): return _inplace(self, "<<=", operator.lshift, o)
    def __irshift__(self, o): return _inplace(self, ">>=", operator.rshift, o)

    def __getitem__(self, key):
        k = _index_key(key, snapshot=True)
        try:
            probe = np.empty(self.shape, dtype=np.bool_)[k]
        except IndexError as e:
            raise AxisError(f"index {key!r} into a tensor of shape {self.shape}: {e}") from e
        return ops._move("getitem", [self], probe.shape, self.dtype, lambda a: a[k], repr(key), k)

    # ---- methods (each the function of the same name in eidos.tensor) ---------------------------
    def astype(self, dtype, copy=True):
        """The values converted to `dtype` (floats to integers truncate toward zero).

        >>> ei.tensor([1.7, -1.7]).astype("int32")
        Tensor([ 1, -1], dtype=int32, device='cpu')
        """
        return ops.astype(self, dtype)

    def abs(self):
        """Element-wise absolute value.

        >>> ei.tensor([-1, 2]).abs()
        Tensor([1, 2], dtype=int64, device='cpu')
        """
        return ops.abs(self)

    def neg(self):
        """Element-wise negation.

        >>> ei.tensor([1, -2]).neg()
        Tensor([-1,  2], dtype=int64, device='cpu')
        """
        return ops.negative(self)

    def sqrt(self):
        """Element-wise square root (integers in float64).

        >>> ei.tensor([1.0, 4.0]).sqrt()
        Tensor([1., 2.], dtype=float64, device='cpu')
        """
        return ops.sqrt(self)

    def exp(self):
        """Element-wise e ** x.

        >>> ei.tensor([0.0, 1.0]).exp()
        Tensor([1.    , 2.7183], dtype=float64, device='cpu')
        """
        return ops.exp(self)

    def log(self):
        """Element-wise natural logarithm.

        >>> ei.tensor([1.0, 100.0]).log()
        Tensor([0.    , 4.6052], dtype=float64, device='cpu')
        """
        return ops.log(self)

    def sin(self):
        """Element-wise sine (radians).

        >>> ei.tensor([0.0, 1.5707963267948966]).sin()
        Tensor([0., 1.], dtype=float64, device='cpu')
        """
        return ops.sin(self)

    def cos(self):
        """Element-wise cosine (radians).

        >>> ei.tensor([0.0, 3.141592653589793]).cos()
        Tensor([ 1., -1.], dtype=float64, device='cpu')
        """
        return ops.cos(self)

    def tan(self):
        """Element-wise tangent (radians).

        >>> ei.tensor([0.0, 0.7853981633974483]).tan()
        Tensor([0., 1.], dtype=float64, device='cpu')
        """
        return ops.tan(self)

    def tanh(self):
        """Element-wise hyperbolic tangent.

        >>> ei.tensor([0.0, 1.0]).tanh()
        Tensor([0.    , 0.7616], dtype=float64, device='cpu')
        """
        return ops.tanh(self)

    def sigmoid(self):
        """Element-wise 1 / (1 + e ** -x).

        >>> ei.tensor([0.0, 2.0]).sigmoid()
        Tensor([0.5   , 0.8808], dtype=float64, device='cpu')
        """
        return ops.sigmoid(self)

    def relu(self):
        """Element-wise max(x, 0).

        >>> ei.tensor([-1.0, 2.0]).relu()
        Tensor([0., 2.], dtype=float64, device='cpu')
        """
        return ops.relu(self)

    def gelu(self):
        """Element-wise GELU, x * Phi(x).

        >>> ei.tensor([0.0, 1.0]).gelu()
        Tensor([0.    , 0.8413], dtype=float64, device='cpu')
        """
        return ops.gelu(self)

    def floor(self):
        """Element-wise floor (integers unchanged).

        >>> ei.tensor([1.5, -1.5]).floor()
        Tensor([ 1., -2.], dtype=float64, device='cpu')
        """
        return ops.floor(self)

    def ceil(self):
        """Element-wise ceiling (integers unchanged).

        >>> ei.tensor([1.5, -1.5]).ceil()
        Tensor([ 2., -1.], dtype=float64, device='cpu')
        """
        return ops.ceil(self)

    def round(self, decimals=0):
        """Element-wise rounding to `decimals` places, halves to even (integers unchanged).

        >>> ei.tensor([0.5, 1.5, 2.26]).round(), ei.tensor([2.26]).round(1)
        (Tensor([0., 2., 2.], dtype=float64, device='cpu'), Tensor([2.3], dtype=float64, device='cpu'))
        """
        return ops.round(self, decimals)

    def clip(self, min=None, max=None):
        """Element-wise clamp to [min, max] (None: no bound).

        >>> ei.tensor([-2, 0, 5]).clip(-1, 3)
        Tensor([-1,  0,  3], dtype=int64, device='cpu')
        """
        return ops.clip(self, min, max)

    def sum(self, axis=None, keepdims=False, dtype=None, *, dim=None, keepdim=None):
        """The sum over `axis` (None: all); integers and bools sum in 64 bits. Every reduction method takes
        torch's `dim=`/`keepdim=` too; min/max with `dim=` give torch's (values, indices).

        >>> ei.tensor([[1, 2], [3, 4]]).sum(axis=0)
        Tensor([4, 6], dtype=int64, device='cpu')
        """
        return ops.sum(self, axis, keepdims, dtype, dim=dim, keepdim=keepdim)

    def prod(self, axis=None, keepdims=False, dtype=None, *, dim=None, keepdim=None):
        """The product over `axis` (None: all); integers and bools multiply in 64 bits.

        >>> ei.tensor([[1, 2], [3, 4]]).prod(axis=1)
        Tensor([ 2, 12], dtype=int64, device='cpu')
        """
        return ops.prod(self, axis, keepdims, dtype, dim=dim, keepdim=keepdim)

    def min(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """The minimum over `axis` (None: all).

        >>> ei.tensor([[1, 5], [3, 2]]).min(axis=1)
        Tensor([1, 2], dtype=int64, device='cpu')
        """
        return ops.min(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def max(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """The maximum over `axis` (None: all).

        >>> ei.tensor([[1, 5], [3, 2]]).max().item()
        5
        """
        return ops.max(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def mean(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """The mean over `axis` (None: all); integers in float64.

        >>> ei.tensor([[1, 2], [3, 4]]).mean(axis=0)
        Tensor([2., 3.], dtype=float64, device='cpu')
        """
        return ops.mean(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def var(self, axis=None, keepdims=False, correction=None, *, dim=None, keepdim=None, unbiased=None):
        """The variance over `axis`, dividing by n - correction (default 0; with torch's `dim=`, 1 as torch's).

        >>> ei.tensor([1.0, 2.0, 3.0, 4.0]).var().item(), ei.tensor([1.0, 3.0]).var(correction=1).item()
        (1.25, 2.0)
        """
        return ops.var(self, axis, keepdims, correction, dim=dim, keepdim=keepdim, unbiased=unbiased)

    def std(self, axis=None, keepdims=False, correction=None, *, dim=None, keepdim=None, unbiased=None):
        """The standard deviation over `axis`: sqrt(var).

        >>> ei.tensor([1.0, 3.0]).std().item()
        1.0
        """
        return ops.std(self, axis, keepdims, correction, dim=dim, keepdim=keepdim, unbiased=unbiased)

    def argmin(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """The index of the first minimum over `axis` (None: of the flattened tensor).

        >>> ei.tensor([[3, 1], [0, 2]]).argmin(axis=1)
        Tensor([1, 0], dtype=int64, device='cpu')
        """
        return ops.argmin(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def argmax(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """The index of the first maximum over `axis` (None: of the flattened tensor).

        >>> ei.tensor([[3, 1], [0, 2]]).argmax().item()
        0
        """
        return ops.argmax(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def any(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Whether any element over `axis` is nonzero.

        >>> ei.tensor([[0, 0], [0, 3]]).any(axis=1)
        Tensor([False,  True], dtype=bool, device='cpu')
        """
        return ops.any(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def all(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Whether every element over `axis` is nonzero.

        >>> ei.tensor([[1, 0], [2, 3]]).all(axis=1)
        Tensor([False,  True], dtype=bool, device='cpu')
        """
        return ops.all(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def softmax(self, axis=None, *, dim=None):
        """exp(x) / sum(exp(x)) along `axis` (the ISA's Softmax instruction).

        >>> ei.tensor([0.0, 0.0, 0.0, 0.0]).softmax()
        Tensor([0.25, 0.25, 0.25, 0.25], dtype=float64, device='cpu')
        """
        return ops.softmax(self, axis, dim=dim)

    def reshape(self, *shape):
        """The same elements in `shape` (one dimension may be -1); a tuple or separate ints.

        >>> ei.tensor([1, 2, 3, 4]).reshape(2, -1)
        Tensor([[1, 2],
                [3, 4]], dtype=int64, device='cpu')
        """
        return ops.reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)

    def transpose(self, *axes):
        """The dimensions permuted by `axes` (none: reversed).

        >>> ei.tensor([[1, 2, 3]]).transpose().shape
        (3, 1)
        """
        return ops.transpose(self, axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else (axes or None))

    def permute(self, *axes):
        """torch's name for .transpose(*axes).

        >>> ei.tensor([[[1, 2, 3]]]).permute(2, 0, 1).shape
        (3, 1, 1)
        """
        return self.transpose(*axes)

    def squeeze(self, axis=None, *, dim=None):
        """Without the dimensions of size 1 at `axis` (None: all of them).

        >>> ei.tensor([[[1], [2]]]).squeeze().shape
        (2,)
        """
        return ops.squeeze(self, axis, dim=dim)

    def unsqueeze(self, axis=None, *, dim=None):
        """With a new dimension of size 1 at `axis` (torch's `dim`).

        >>> ei.tensor([1, 2]).unsqueeze(0).shape
        (1, 2)
        """
        return ops.expand_dims(self, axis, dim=dim)

    def expand(self, *shape):
        """Broadcast to `shape` (-1 keeps a dimension).

        >>> ei.tensor([[1], [2]]).expand(-1, 3)
        Tensor([[1, 1, 1],
                [2, 2, 2]], dtype=int64, device='cpu')
        """
        return ops.expand(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)

    def flatten(self):
        """The elements in one dimension (row-major order).

        >>> ei.tensor([[1, 2], [3, 4]]).flatten()
        Tensor([1, 2, 3, 4], dtype=int64, device='cpu')
        """
        return ops.reshape(self, (-1,))

    @property
    def T(self) -> Tensor:
        """The transpose of a 2-d tensor.

        >>> ei.tensor([[1, 2]]).T.shape
        (2, 1)
        """
        if self.ndim != 2:
            raise ShapeError(f".T needs a 2-d tensor, got shape {self.shape}; use transpose(axes)")
        return ops.transpose(self)

    @property
    def mT(self) -> Tensor:
        """The last two dimensions swapped (a stack of matrices, each transposed).

        >>> ei.tensor([[[1, 2, 3]]]).mT.shape
        (1, 3, 1)
        """
        if self.ndim < 2:
            raise ShapeError(f".mT needs at least 2 dimensions, got shape {self.shape}")
        axes = list(range(self.ndim))
        axes[-1], axes[-2] = axes[-2], axes[-1]
        return ops.transpose(self, axes)

    # ---- torch's spellings ---------------------------------------------------------------------------------
    def view(self, *shape):
        """torch's reshape (the same elements in `shape`); `.view(dtype)` reinterprets the bytes as `dtype`
        (the last dimension scales by the ratio of the item sizes). A value, as every eidos tensor: writing into
        the view does not change this tensor.

        >>> ei.tensor([1, 2, 3, 4]).view(2, 2).shape, ei.tensor([1.0], dtype="float32").view("int32").item()
        ((2, 2), 1065353216)
        """
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer, tuple, list)):
            return ops._view_dtype(self, shape[0])
        return self.reshape(*shape)

    def clone(self) -> Tensor:
        """A copy with its own memory (lazy: made when a value is needed), as torch's.

        >>> t = ei.tensor([1, 2])
        >>> c = t.clone()
        >>> c += 1
        >>> t.tolist(), c.tolist()
        ([1, 2], [2, 3])
        """
        return ops._clone(self)

    def matmul(self, other) -> Tensor:
        """self @ other (see eidos.tensor.matmul).

        >>> ei.tensor([[1, 2]]).matmul(ei.tensor([[3], [4]]))
        Tensor([[11]], dtype=int64, device='cpu')
        """
        return ops.matmul(self, other)

    def clamp(self, min=None, max=None):
        """torch's name for .clip(min, max).

        >>> ei.tensor([-2, 0, 5]).clamp(min=0)
        Tensor([0, 0, 5], dtype=int64, device='cpu')
        """
        return ops.clip(self, min, max)

    def dim(self) -> int:
        """torch's name for .ndim.

        >>> ei.tensor([[1, 2]]).dim()
        2
        """
        return self.ndim

    def numel(self) -> int:
        """torch's name for .size (the number of elements).

        >>> ei.tensor([[1, 2]]).numel()
        2
        """
        return self.size

    # torch's dtype methods
    def float(self) -> Tensor:
        """torch's name for .astype('float32').

        >>> ei.tensor([1, 2]).float()
        Tensor([1., 2.], dtype=float32, device='cpu')
        """
        return ops.astype(self, D.float32)

    def half(self) -> Tensor:
        """torch's name for .astype('float16').

        >>> ei.tensor([1, 2]).half().dtype
        dtype('float16')
        """
        return ops.astype(self, D.float16)

    def bfloat16(self) -> Tensor:
        """torch's name for .astype('bfloat16').

        >>> ei.tensor([1, 2]).bfloat16().dtype
        dtype(bfloat16)
        """
        return ops.astype(self, D.bfloat16)

    def double(self) -> Tensor:
        """torch's name for .astype('float64').

        >>> ei.tensor([1, 2], dtype='float32').double().dtype
        dtype('float64')
        """
        return ops.astype(self, D.float64)

    def int(self) -> Tensor:
        """torch's name for .astype('int32').

        >>> ei.tensor([1.7, -1.7]).int()
        Tensor([ 1, -1], dtype=int32, device='cpu')
        """
        return ops.astype(self, D.int32)

    def long(self) -> Tensor:
        """torch's name for .astype('int64').

        >>> ei.tensor([1.7]).long().dtype
        dtype('int64')
        """
        return ops.astype(self, D.int64)

    def bool(self) -> Tensor:
        """torch's name for .astype('bool').

        >>> ei.tensor([0, 2]).bool()
        Tensor([False,  True], dtype=bool, device='cpu')
        """
        return ops.astype(self, D.bool_)

    # torch's in-place methods (trailing underscore): the result written into this tensor's memory in its dtype
    # (NumPy's same-kind rule, as torch's: an integer tensor's div_ is an error); the tensor itself returned.
    def add_(self, other, *, alpha=1) -> Tensor:
        """x + other * alpha, in place (torch's add_): into this tensor's memory, in its dtype.

        >>> ei.tensor([1, 2]).add_(ei.tensor([10, 20]), alpha=2)
        Tensor([21, 42], dtype=int64, device='cpu')
        """
        return _inplace(self, "+=", operator.add, other if alpha == 1 else other * alpha, "add_")

    def sub_(self, other, *, alpha=1) -> Tensor:
        """x - other * alpha, in place (torch's sub_): into this tensor's memory, in its dtype.

        >>> ei.tensor([5, 6]).sub_(1)
        Tensor([4, 5], dtype=int64, device='cpu')
        """
        return _inplace(self, "-=", operator.sub, other if alpha == 1 else other * alpha, "sub_")

    def mul_(self, other) -> Tensor:
        """x * other, in place (torch's mul_): into this tensor's memory, in its dtype.

        >>> ei.tensor([1.0, 2.0]).mul_(3)
        Tensor([3., 6.], dtype=float64, device='cpu')
        """
        return _inplace(self, "*=", operator.mul, other, "mul_")

    def div_(self, other) -> Tensor:
        """x / other, in place (torch's div_): into this tensor's memory, in its dtype.

        >>> ei.tensor([1.0, 2.0]).div_(4)
        Tensor([0.25, 0.5 ], dtype=float64, device='cpu')
        """
        return _inplace(self, "/=", operator.truediv, other, "div_")

    def pow_(self, other) -> Tensor:
        """x ** other, in place (torch's pow_): into this tensor's memory, in its dtype.

        >>> ei.tensor([2, 3]).pow_(2)
        Tensor([4, 9], dtype=int64, device='cpu')
        """
        return _inplace(self, "**=", operator.pow, other, "pow_")

    def abs_(self) -> Tensor:
        """abs(x), in place (torch's abs_): into this tensor's memory, in its dtype.

        >>> ei.tensor([-1, 2]).abs_()
        Tensor([1, 2], dtype=int64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.abs(a), None, "abs_")

    def neg_(self) -> Tensor:
        """negative(x), in place (torch's neg_): into this tensor's memory, in its dtype.

        >>> ei.tensor([1, -2]).neg_()
        Tensor([-1,  2], dtype=int64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.negative(a), None, "neg_")

    def sqrt_(self) -> Tensor:
        """sqrt(x), in place (torch's sqrt_): into this tensor's memory, in its dtype.

        >>> ei.tensor([4.0, 9.0]).sqrt_()
        Tensor([2., 3.], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.sqrt(a), None, "sqrt_")

    def exp_(self) -> Tensor:
        """exp(x), in place (torch's exp_): into this tensor's memory, in its dtype.

        >>> ei.tensor([0.0]).exp_()
        Tensor([1.], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.exp(a), None, "exp_")

    def log_(self) -> Tensor:
        """log(x), in place (torch's log_): into this tensor's memory, in its dtype.

        >>> ei.tensor([1.0]).log_()
        Tensor([0.], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.log(a), None, "log_")

    def sin_(self) -> Tensor:
        """sin(x), in place (torch's sin_): into this tensor's memory, in its dtype.

        >>> ei.tensor([0.0]).sin_()
        Tensor([0.], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.sin(a), None, "sin_")

    def cos_(self) -> Tensor:
        """cos(x), in place (torch's cos_): into this tensor's memory, in its dtype.

        >>> ei.tensor([0.0]).cos_()
        Tensor([1.], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.cos(a), None, "cos_")

    def tanh_(self) -> Tensor:
        """tanh(x), in place (torch's tanh_): into this tensor's memory, in its dtype.

        >>> ei.tensor([0.0]).tanh_()
        Tensor([0.], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.tanh(a), None, "tanh_")

    def sigmoid_(self) -> Tensor:
        """sigmoid(x), in place (torch's sigmoid_): into this tensor's memory, in its dtype.

        >>> ei.tensor([0.0]).sigmoid_()
        Tensor([0.5], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.sigmoid(a), None, "sigmoid_")

    def relu_(self) -> Tensor:
        """relu(x), in place (torch's relu_): into this tensor's memory, in its dtype.

        >>> ei.tensor([-1.0, 2.0]).relu_()
        Tensor([0., 2.], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.relu(a), None, "relu_")

    def floor_(self) -> Tensor:
        """floor(x), in place (torch's floor_): into this tensor's memory, in its dtype.

        >>> ei.tensor([1.5, -1.5]).floor_()
        Tensor([ 1., -2.], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.floor(a), None, "floor_")

    def ceil_(self) -> Tensor:
        """ceil(x), in place (torch's ceil_): into this tensor's memory, in its dtype.

        >>> ei.tensor([1.5, -1.5]).ceil_()
        Tensor([ 2., -1.], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.ceil(a), None, "ceil_")

    def round_(self) -> Tensor:
        """round(x), in place (torch's round_): into this tensor's memory, in its dtype.

        >>> ei.tensor([0.5, 1.5]).round_()
        Tensor([0., 2.], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.round(a), None, "round_")

    def trunc_(self) -> Tensor:
        """trunc(x), in place (torch's trunc_): into this tensor's memory, in its dtype.

        >>> ei.tensor([1.5, -1.5]).trunc_()
        Tensor([ 1., -1.], dtype=float64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.trunc(a), None, "trunc_")

    def clamp_(self, min=None, max=None) -> Tensor:
        """clip(x, min, max), in place (torch's clamp_; clip_ is the same method).

        >>> ei.tensor([-2, 0, 5]).clamp_(0, 3)
        Tensor([0, 0, 3], dtype=int64, device='cpu')
        """
        return _inplace(self, "=", lambda a, _: ops.clip(a, min, max), None, "clamp_")

    clip_ = clamp_

    def fill_(self, value):
        """Every element set to `value` (converted to the dtype, as torch's and NumPy's fill), in place.

        >>> ei.tensor([1, 2, 3]).fill_(7)
        Tensor([7, 7, 7], dtype=int64, device='cpu')
        """
        self[...] = value
        return self

    def zero_(self):
        """Every element set to 0, in place.

        >>> ei.tensor([1.5, 2.5]).zero_()
        Tensor([0., 0.], dtype=float64, device='cpu')
        """
        return self.fill_(0)

    def copy_(self, src):
        """src's values written into this tensor (broadcast, converted to its dtype, as torch's copy_).

        >>> ei.tensor([0, 0]).copy_(ei.tensor([1.9, 2.1]))
        Tensor([1, 2], dtype=int64, device='cpu')
        """
        if isinstance(src, Tensor) and src.dtype != self.dtype and src.dtype not in D.COMPLEX:
            src = ops.astype(src, self.dtype)
        self[...] = src
        return self


def _is_dtype(x) -> bool:
    """Whether .to()'s argument is a dtype (a name, a NumPy dtype or type, a torch dtype) rather than a device."""
    if isinstance(x, str):
        return x in D.NAMES
    return isinstance(x, (np.dtype, type)) or (type(x).__name__ == "dtype" and type(x).__module__ == "torch")


def _device_name(device) -> str:
    """'cpu', 'gpu', 'remote:gpu' or 'remote:cpu' for a device given as a string ('cuda', 'cuda:0' and 'gpu:0'
    mean 'gpu', and so does 'gpu:N' where N is the GPU this process's gpu tensors use, as in a rank of
    eidos.isa.distributed; 'remote' means 'remote:gpu') or an object with a .type (a torch.device)."""
    text = str(getattr(device, "type", device)).lower()
    name, _, index = text.partition(":")
    if name == "cpu" and not index:
        return "cpu"
    if name in ("gpu", "cuda") and (index in ("", "0") or index.isdigit() and index == _dev.gpu_index()):
        return "gpu"
    if name in ("gpu", "cuda") and index.isdigit():
        raise DeviceError(f"device {device!r}: this process's tensors use one GPU ('gpu', gpu:"
                          f"{_dev.gpu_index() or 0}); a tensor over several GPUs is eidos.tensor.sharded, each "
                          "GPU's shard held by a process of its own (eidos.isa.distributed.Ranks)")
    if name == "remote" and index in ("", "gpu", "cpu"):
        return f"remote:{index or 'gpu'}"
    raise DeviceError(f"unknown device {device!r}; devices: 'cpu', 'gpu' (also 'cuda', 'cuda:0'; one GPU), "
                      "'remote:gpu', 'remote:cpu' (a service: ei.connect)")


def _index_key(key, snapshot: bool = False):
    """A key NumPy can index with (tensors in it as host arrays). `snapshot`: array parts (tensors, NumPy arrays,
    lists) copied, for a lazy getitem: the key's values as they are now, whatever is written into them later."""
    parts = key if isinstance(key, tuple) else (key,)
    if not snapshot and not any(isinstance(k, Tensor) for k in parts):
        return key
    out = []
    for k in parts:
        if isinstance(k, Tensor):
            k = _host(k).copy() if snapshot and k.device == "cpu" else _host(k)   # (a device key's is a copy)
        elif snapshot and isinstance(k, (np.ndarray, list)):
            k = np.array(k)
        out.append(k)
    return tuple(out) if isinstance(key, tuple) else out[0]


def _mixed(op: str, args) -> DeviceError:
    """Operands on different devices: eidos does not move data behind a user's back (as torch)."""
    where = ", ".join(f"{a.device} {a.shape}" for a in args if isinstance(a, Tensor))
    return DeviceError(f"{op}: operands are on different devices ({where}); move them to one first, "
                       f"e.g. x.to('gpu') or x.to('cpu')")


# ---- value semantics ----------------------------------------------------------------------------
# A tensor's value is fixed when it is defined. Each tensor keeps weak references to its readers: the graph
# nodes that read it while pending, and the realized tensors whose memory is a view of its memory (a layout
# move or a host function that returned a view keeps those operands in _args). A write into a tensor first
# gives them the value as it is (copy-on-write: one copy, only when there is a reader left).

def _read_by(t: Tensor, args) -> None:
    """Record t as a reader of the tensors among args."""
    ref = None
    for a in args:
        if a.__class__ is Tensor:
            if ref is None:
                ref = weakref.ref(t)
            r = a._readers
            if r is None:
                a._readers = [ref]
                continue
            r.append(ref)
            if len(r) >= 32 and not len(r) & (len(r) - 1):
                _prune_readers(a)


def _prune_readers(a: Tensor) -> None:
    """Drop the dead and the realized non-views from a's readers: at each power of two of its length (amortized O(1))."""
    a._readers = [w for w in a._readers if (x := w()) is not None and (x._data is None or x._args)]


def _readers(t: Tensor):
    """The live readers of t that still read it (pending with t an operand, or a realized view of t)."""
    for w in t._readers or ():
        r = w()
        if r is not None and r._args and any(a is t for a in r._args):
            yield r


def _retarget(readers, t: Tensor, old: Tensor) -> None:
    """The readers read `old` in place of t; old records them."""
    for r in readers:
        r._args = tuple(old if a is t else a for a in r._args)
        _read_by(r, (old,))


def _detached(t: Tensor, data) -> Tensor:
    """A new tensor with t's value: `data` (realized), or t's graph (pending), reading what t read."""
    old = Tensor.__new__(Tensor)
    old.shape, old.dtype, old.device, old._data, old._op, old._args, old._attrs, old._runs, old._readers = \
        t.shape, t.dtype, t.device, data, t._op, t._args if data is t._data else (), t._attrs, list(t._runs), None
    if old._args:
        _read_by(old, old._args)
    return old


def _before_write(t: Tensor) -> None:
    """Before t's memory (realized) is written in place: the graphs that read t get its value as it is now, and
    no other tensor sees the write. t's memory a view of another tensor's: t takes a copy and the view (with its
    readers) stays with the others. Else: pending readers share one copy of t's memory; views of it take their
    own copies. Memory shared with NumPy on request (copy=False, from_dlpack, .numpy()) sees the write."""
    if not t._readers and not t._args:
        return
    readers = list(_readers(t))
    t._readers = None
    xp = _dev.storage(t.device)
    if t._args:
        _retarget(readers, t, _detached(t, t._data))
        t._data, t._args = xp.copy(t._data), ()
        return
    pending = [r for r in readers if r._data is None]
    if pending:
        _retarget(pending, t, _detached(t, xp.copy(t._data)))
    for r in readers:
        if r._data is not None:
            _unshare(r, t._data, xp)


def _unshare(r: Tensor, mem, xp) -> None:
    """r, a realized view, and the views of it, take their own copies where they share `mem`."""
    if not _dev.shares(r._data, mem):
        return
    for v in list(_readers(r)):
        if v._data is not None:
            _unshare(v, mem, xp)
    r._data, r._args = xp.copy(r._data), ()


def _assign(t: Tensor, r: Tensor) -> None:
    """t takes r's value (an in-place operator); the graphs that read t, r among them, read its old value, held by
    a new tensor (no copy: t's new value is computed into new memory)."""
    readers = list(_readers(t))
    t._readers = None
    _retarget(readers, t, _detached(t, t._data))
    t._data, t._op, t._args, t._attrs, t._runs = r._data, r._op, r._args, r._attrs, r._runs
    if t._args:
        _read_by(t, t._args)


def _inplace(t: Tensor, sym: str, fn, o, name: str | None = None) -> Tensor:
    """t <sym> o: fn(t, o) written into t's memory, in t's dtype and shape, as NumPy (a result of another kind,
    as float into int, or of another shape is an error). A pending t (no memory yet) or one on a service takes
    the new value as a lazy node instead: nothing outside could see its memory."""
    what = name or f"x {sym} y"
    instead = f"x = x {sym[:-1]} y" if sym != "=" else f"x = x.{name[:-1]}(...)"
    r = fn(t, o)
    if r.shape != t.shape:
        raise ShapeError(f"{what}: the result has shape {r.shape}, x has {t.shape}; an in-place operation keeps "
                         f"x's shape (y broadcasts to it); write {instead} for a new tensor")
    if r.dtype != t.dtype:
        if not np.can_cast(r.dtype, t.dtype, "same_kind"):
            raise DTypeError(f"{what}: the result is {r.dtype}, which x's dtype {t.dtype} cannot take (NumPy's "
                             f"same-kind rule, as torch's in-place methods); write {instead} for a new tensor")
        r = ops.astype(r, t.dtype)
    if r is t:
        return t
    if t._data is None or t.device[0] == "r":
        _assign(t, r)
        return t
    _realize(r)
    t[...] = r
    t._runs[-1] = (what, f"written into x's memory ({'host, NumPy' if t.device == 'cpu' else 'device, torch'} copy)")
    return t


# ---- construction -----------------------------------------------------------------------------

_CONVERTED = (list, tuple, range, bool, int, float, complex, np.generic)   # data np.asarray puts in new memory


def tensor(data, dtype=None, device=None, *, copy=None) -> Tensor:
    """A tensor from nested lists, scalars, NumPy arrays, DLPack producers or other tensors, on `device`
    (default: where the data is: the host, or the gpu for a producer on the device). `ei.tensor(...)` calls it.

    copy=None (the default) copies memory something else can write (a NumPy array, a DLPack producer), so a
    graph built on the tensor computes with the values it had here, as NumPy would; nothing is copied twice
    (lists, scalars and a dtype change make new memory anyway; a tensor is itself). copy=False shares that
    memory: no copy, and a graph that has not run yet reads the memory when it runs. copy=True always copies.

    >>> ei.tensor([[1, 2], [3, 4]], dtype="float32")
    Tensor([[1., 2.],
            [3., 4.]], dtype=float32, device='cpu')
    >>> a = np.array([1.0, 2.0])
    >>> t, shared = ei.tensor(a), ei.tensor(a, copy=False)
    >>> a[0] = 5.0
    >>> t.tolist(), shared.tolist()
    ([1.0, 2.0], [5.0, 2.0])
    """
    t, shares = _wrap(data, dtype)
    if device is not None and t.device != (name := _device_name(device)):
        return t.to(name)  # a copy on the other device
    if shares and (copy or (copy is None and not isinstance(data, Tensor))):
        a = _realize(t)
        t = Tensor(a.copy()) if t.device == "cpu" else Tensor(a.clone(), _device=t.device)
    return t


def _wrap(data, dtype):
    """(a tensor of data, whether its memory is data's own)."""
    if isinstance(data, Tensor) or _dev.is_device_producer(data):
        t = data if isinstance(data, Tensor) else from_dlpack(data)
        r = t if dtype is None else ops.astype(t, dtype)
        return r, r is t
    if hasattr(data, "__dlpack__") and not isinstance(data, np.ndarray):
        arr, shares = _dlpack.host_array(data), True
    else:
        arr, shares = np.asarray(data), not isinstance(data, _CONVERTED)
    new = arr
    if dtype is not None:
        new = arr.astype(D.as_dtype(dtype), copy=False)
    elif arr.dtype.kind in "iu" and arr.dtype not in D.DTYPES:
        new = arr.astype(np.int64)
    if new.dtype not in D.DTYPES:
        raise DTypeError(f"tensor: dtype {new.dtype} is not supported; dtypes: {', '.join(D.NAMES)}")
    return Tensor(new), shares and new is arr


def from_dlpack(x, *, device=None, copy=None) -> Tensor:
    """A tensor sharing memory with a DLPack producer: one in host memory (NumPy, torch CPU, ...) gives a
    host tensor, one on the GPU (torch CUDA, CuPy, ...) a gpu tensor. `device` asks for the other one:
    that copies, unless the device is simulated on the host (TRITON_INTERPRET=1), where a host producer's
    memory is shared as the gpu tensor's; copy=False refuses to copy, copy=True always copies.

    >>> a = np.array([1.0, 2.0])
    >>> t = ei.from_dlpack(a)
    >>> a[0] = 5.0
    >>> t
    Tensor([5., 2.], dtype=float64, device='cpu')
    """
    want = None if device is None else _device_name(device)
    if isinstance(x, Tensor):
        t = x
    elif _dev.is_device_producer(x):
        t = Tensor(_dev.adopt(x), _device="gpu")
    elif want == "gpu" and not copy and _backend.get_backend("gpu").is_available() and \
            _dev.torch_device().type == "cpu":  # the interpreter's device memory is host memory: share it
        return Tensor(_dev.adopt(x), _device="gpu")
    else:
        t = Tensor(_dlpack.host_array(x))
    if want is None or want == t.device:
        if copy:
            a = _realize(t)
            return Tensor(a.copy()) if t.device == "cpu" else Tensor(a.clone(), _device="gpu")
        return t
    if copy is False:
        raise DeviceError(f"from_dlpack: the data is in {t.device} memory and device={device!r} needs a copy, "
                          "but copy=False")
    return t.to(want)


def host_result(values, why: str = "host NumPy (no ISA instruction for it)") -> Tensor:
    """A tensor of values computed outside eidos's programs (NumPy on the host), realized, with `why` as its
    explain() record; integers of other widths become int64 and complex values complex128.

    >>> t = ei.tensor.host_result(np.sort(np.array([3, 1, 2], dtype=np.int16)), "host NumPy sort")
    >>> t, "host NumPy sort" in ei.tensor.explain(t)
    (Tensor([1, 2, 3], dtype=int16, device='cpu'), True)
    """
    a = np.asarray(values)
    if a.dtype not in D.DTYPES:
        if a.dtype.kind in "iu":
            a = a.astype(np.int64)
        elif a.dtype.kind == "c":
            a = a.astype(np.complex128)
    t = Tensor(a)
    t._runs.append((why, "cpu"))
    return t


def zeros(shape, dtype=D.float32) -> Tensor:
    """A tensor of zeros (float32 unless `dtype`).

    >>> ei.tensor.zeros((2,))
    Tensor([0., 0.], dtype=float32, device='cpu')
    """
    return Tensor(np.zeros(shape, dtype=D.as_dtype(dtype)))


def ones(shape, dtype=D.float32) -> Tensor:
    """A tensor of ones (float32 unless `dtype`).

    >>> ei.tensor.ones((2,), dtype="int32")
    Tensor([1, 1], dtype=int32, device='cpu')
    """
    return Tensor(np.ones(shape, dtype=D.as_dtype(dtype)))


def full(shape, value, dtype=None) -> Tensor:
    """A tensor of `value` (its dtype unless `dtype`).

    >>> ei.tensor.full((2,), 7)
    Tensor([7, 7], dtype=int64, device='cpu')
    """
    dt = D.as_dtype(dtype) if dtype is not None else tensor(value).dtype
    return Tensor(np.full(shape, value, dtype=dt))


def arange(start, stop=None, step=1, dtype=None) -> Tensor:
    """start, start + step, ... below stop (one argument: 0 .. start - 1), as NumPy's arange.

    >>> ei.tensor.arange(1, 7, 2)
    Tensor([1, 3, 5], dtype=int64, device='cpu')
    """
    a = np.arange(start, stop, step) if stop is not None else np.arange(start)
    return tensor(a, dtype=dtype, copy=False)


def rand(*shape, seed=None) -> Tensor:
    """Uniform float32 values in [0, 1) (NumPy's default generator, seeded by `seed`).

    >>> t = ei.tensor.rand(2, 3, seed=0)
    >>> t.shape, t.dtype, bool(((t >= 0) & (t < 1)).all())
    ((2, 3), dtype('float32'), True)
    """
    return Tensor(np.random.default_rng(seed).random(shape, dtype=np.float32))


def randn(*shape, seed=None) -> Tensor:
    """Standard normal float32 values (NumPy's default generator, seeded by `seed`).

    >>> ei.tensor.randn(4, seed=0).shape
    (4,)
    """
    return Tensor(np.random.default_rng(seed).standard_normal(shape, dtype=np.float32))


# doctest does not look into slots: their examples run from here
__test__ = {f"Tensor.{name}": Tensor.__slots__[name] for name in ("shape", "dtype", "device")}

# the operations and realization use Tensor: imported once it exists
from . import ops  # noqa: E402
from . import protocols as _protocols  # noqa: E402
from .realization import _host, _realize  # noqa: E402
