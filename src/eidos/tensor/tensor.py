"""Tensor: an n-dimensional array whose operations record a graph, realized as fused ISA programs.

Element-wise operations, and a reduction that follows them, become ONE program when a value is
needed (`.numpy()`, printing, `bool()`, `ei.realize(...)`); `with ei.eager():` runs each operation
at once. Data movement (reshape, transpose, slicing, concatenation, broadcasting a non-scalar
operand) is layout work done by NumPy on the host between programs; matmul, softmax and
layer_norm are the ISA's GEMM/BatchedGEMM, Softmax and LayerNorm instructions.
"""

from __future__ import annotations

import builtins as _builtins
import math
import operator
import threading
from collections.abc import Sequence

import numpy as np

from eidos.errors import AxisError, BackendUnavailable, EidosError, ShapeError
from eidos.isa import ExecutionParams

from . import backend as _backend
from . import complex as C
from . import storage as _dev
from . import dtypes as D
from . import lower as L
from .dtypes import DTypeError


class _Eager(threading.local):
    """Per thread: whether `ei.eager()` is on (a class default, so the hot path reads `_local.eager` directly)."""
    eager = False


_local = _Eager()
_counters = {"programs": 0}
_small_kernel = _backend.small_kernel
_small_table = _backend.small_table   # its memo per operation, read directly on the hot path
_SMALL_TABLES = _backend._small       # (op -> that memo)
_SMALL_MAX = _backend.SMALL_MAX_ELEMENTS


def programs_executed() -> int:
    """How many ISA programs tensor operations have run in this process (fusion is tested with it)."""
    return _counters["programs"]


class eager:
    """`with ei.eager():` runs each tensor operation as soon as it is made (no graph, no fusion across
    operations). A class rather than a generator: entering it costs a fraction of a microsecond."""

    __slots__ = ("old",)

    def __enter__(self):
        self.old = getattr(_local, "eager", False)
        _local.eager = True
        return self

    def __exit__(self, *exc):
        _local.eager = self.old
        return False


def is_eager() -> bool:
    return getattr(_local, "eager", False)


class Const:
    """A Python scalar in a graph, with the dtype it takes next to its tensor operand."""
    __slots__ = ("value", "dtype")

    def __init__(self, value, dtype) -> None:
        self.value, self.dtype = value, dtype

    shape = ()


def _broadcast_shapes(*shapes, what: str = "operands") -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} do not broadcast ({what})") from None


def _norm_axes(axis, ndim: int, what: str) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise AxisError(f"{what}: axis must be an int or a tuple of ints, got {a!r}")
        if not -ndim <= a < ndim if ndim else a not in (0, -1):
            raise AxisError(f"{what}: axis {a} is out of range for a tensor of {ndim} dimension(s)")
        a = int(a) % _builtins.max(ndim, 1)
        if a in out:
            raise AxisError(f"{what}: axis {a} repeated")
        out.append(a)
    return tuple(sorted(out))


class Tensor:
    """An n-dimensional array: lazy by default (see the module doc)."""

    __slots__ = ("shape", "dtype", "device", "_data", "_op", "_args", "_attrs", "_runs", "__weakref__")
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
        self.device = _device  # where the data lives (or will): "cpu" (NumPy) or "gpu" (torch, eidos.tensor.storage)
        self._op, self._args, self._attrs = _op, tuple(_args), _attrs
        self._runs: list = []

    # ---- basic properties ---------------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def is_realized(self) -> bool:
        return self._data is not None

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- realization ---------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The values as a NumPy array (realizing the graph; shares memory with a host tensor, a copy of
        a gpu tensor's device data)."""
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
        _realize(self)
        return self

    def item(self):
        if self.size != 1:
            raise ShapeError(f"item(): the tensor has shape {self.shape}, not one element")
        return _host(self).reshape(()).item()

    def tolist(self):
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

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # ---- DLPack and devices ------------------------------------------------------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        a = _realize(self)
        if self.device != "cpu":  # torch exports the device memory (and orders `stream` after its own)
            kw = {"max_version": max_version, "dl_device": dl_device, "copy": copy}
            return a.__dlpack__(stream=-1 if stream is None else stream, **{k: v for k, v in kw.items() if v is not None})
        if self.dtype == D.bfloat16:
            raise DTypeError("bfloat16 has no NumPy DLPack export; convert with .astype('float32') first")
        kw = {}
        if max_version is not None:
            kw["max_version"] = max_version
        if copy is not None:
            kw["copy"] = copy
        if dl_device is not None:
            kw["dl_device"] = dl_device
        try:
            return a.__dlpack__(stream=stream, **kw)
        except TypeError:
            return a.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        if self.device != "cpu":
            return _realize(self).__dlpack_device__()
        return (1, 0)  # kDLCPU

    def to(self, device) -> Tensor:
        """The tensor on `device`: 'cpu' (host, NumPy) or 'gpu' ('cuda', 'cuda:0': the gpu backend's device).
        Realizes the graph where it is, then copies the data once; the same tensor if it is already there."""
        name = _device_name(device)
        if name == self.device:
            return self
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
        return self.to("cpu")

    def to_device(self, device, /, *, stream=None) -> Tensor:
        """The Array API's name for .to(device)."""
        return self.to(device)

    def __array_namespace__(self, *, api_version=None):
        if api_version not in (None, "2021.12", "2022.12", "2023.12"):
            raise ValueError(f"unsupported Array API version {api_version!r}")
        import eidos.array_api as xp

        return xp

    # ---- operators ---------------------------------------------------------------------------
    # + - * (and / on floats) take the small eager path inline: see _eager_binary
    def __radd__(self, o): return _binary("add", o, self)
    def __rsub__(self, o): return _binary("sub", o, self)
    def __rmul__(self, o): return _binary("mul", o, self)
    def __rtruediv__(self, o): return divide(o, self)
    def __floordiv__(self, o): return _binary("floordiv", self, o)
    def __rfloordiv__(self, o): return _binary("floordiv", o, self)
    def __mod__(self, o): return _binary("mod", self, o)
    def __rmod__(self, o): return _binary("mod", o, self)
    def __pow__(self, o): return pow(self, o)
    def __rpow__(self, o): return pow(o, self)
    def __matmul__(self, o): return matmul(self, o)
    def __rmatmul__(self, o): return matmul(o, self)
    def __and__(self, o): return _bitwise("and", self, o)
    def __rand__(self, o): return _bitwise("and", o, self)
    def __or__(self, o): return _bitwise("or", self, o)
    def __ror__(self, o): return _bitwise("or", o, self)
    def __xor__(self, o): return _bitwise("xor", self, o)
    def __rxor__(self, o): return _bitwise("xor", o, self)
    def __lshift__(self, o): return _bitwise("lshift", self, o)
    def __rlshift__(self, o): return _bitwise("lshift", o, self)
    def __rshift__(self, o): return _bitwise("rshift", self, o)
    def __rrshift__(self, o): return _bitwise("rshift", o, self)
    def __eq__(self, o): return _compare("eq", self, o)
    def __ne__(self, o): return _compare("ne", self, o)
    def __lt__(self, o): return _compare("lt", self, o)
    def __le__(self, o): return _compare("le", self, o)
    def __gt__(self, o): return _compare("gt", self, o)
    def __ge__(self, o): return _compare("ge", self, o)
    def __neg__(self): return negative(self)
    def __pos__(self): return self
    def __abs__(self): return abs(self)
    def __invert__(self):
        if self.dtype == D.bool_:
            return _unary("logical_not", self, D.bool_)
        _need(self, "~", ints=True)
        return _unary("invert", self)
    __hash__ = None  # type: ignore[assignment]

    # in-place forms rebind (a Tensor's graph node is immutable)
    def __setitem__(self, key, value):
        if self.dtype not in D.COMPLEX and (isinstance(value, (complex, np.complexfloating)) or (
                isinstance(value, Tensor) and value.dtype in D.COMPLEX)):
            raise DTypeError(f"setitem: a complex value into a {self.dtype} tensor would drop its imaginary part; "
                             "assign real(value) or make the tensor complex")
        a = _realize(self)
        if self.device != "cpu":
            if isinstance(value, Tensor) and value.device != self.device:
                raise _mixed("setitem", [self, value])
            if not a.is_contiguous():
                a = self._data = a.contiguous()
            k = _index_key(key)
            try:
                np.empty(self.shape, dtype=np.bool_)[k]
            except IndexError as e:
                raise AxisError(f"setitem on a tensor of shape {self.shape}: {e}") from e
            try:
                _dev.setitem(a, k, _realize(value) if isinstance(value, Tensor) else value)
            except (RuntimeError, ValueError) as e:
                raise ShapeError(f"setitem on a tensor of shape {self.shape}: {e}") from e
            self._runs.append(("setitem", "device (torch index_copy_)"))
            return
        if isinstance(value, Tensor) and value.device != "cpu":
            raise _mixed("setitem", [self, value])
        if not a.flags.writeable:
            a = self._data = a.copy()
        v = _realize(value) if isinstance(value, Tensor) else value
        try:
            a[_index_key(key)] = v
        except (IndexError, ValueError) as e:
            raise ShapeError(f"setitem on a tensor of shape {self.shape}: {e}") from e
        self._runs.append(("setitem", "host (NumPy)"))

    def __getitem__(self, key):
        k = _index_key(key)
        try:
            probe = np.empty(self.shape, dtype=np.bool_)[k]
        except IndexError as e:
            raise AxisError(f"index {key!r} into a tensor of shape {self.shape}: {e}") from e
        return _move("getitem", [self], probe.shape, self.dtype, lambda a: a[k], repr(key), k)

    # ---- methods -----------------------------------------------------------------------------
    def astype(self, dtype, copy=True): return astype(self, dtype)
    def abs(self): return abs(self)
    def neg(self): return negative(self)
    def sqrt(self): return sqrt(self)
    def exp(self): return exp(self)
    def log(self): return log(self)
    def sin(self): return sin(self)
    def cos(self): return cos(self)
    def tan(self): return tan(self)
    def tanh(self): return tanh(self)
    def sigmoid(self): return sigmoid(self)
    def relu(self): return relu(self)
    def gelu(self): return gelu(self)
    def floor(self): return floor(self)
    def ceil(self): return ceil(self)
    def round(self, decimals=0): return round(self, decimals)
    def clip(self, min=None, max=None): return clip(self, min, max)
    def sum(self, axis=None, keepdims=False, dtype=None): return sum(self, axis, keepdims, dtype)
    def prod(self, axis=None, keepdims=False, dtype=None): return prod(self, axis, keepdims, dtype)
    def min(self, axis=None, keepdims=False): return min(self, axis, keepdims)
    def max(self, axis=None, keepdims=False): return max(self, axis, keepdims)
    def mean(self, axis=None, keepdims=False): return mean(self, axis, keepdims)
    def var(self, axis=None, keepdims=False, correction=0): return var(self, axis, keepdims, correction)
    def std(self, axis=None, keepdims=False, correction=0): return std(self, axis, keepdims, correction)
    def argmin(self, axis=None, keepdims=False): return argmin(self, axis, keepdims)
    def argmax(self, axis=None, keepdims=False): return argmax(self, axis, keepdims)
    def any(self, axis=None, keepdims=False): return any(self, axis, keepdims)
    def all(self, axis=None, keepdims=False): return all(self, axis, keepdims)
    def softmax(self, axis=-1): return softmax(self, axis)
    def reshape(self, *shape): return reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)
    def transpose(self, *axes): return transpose(self, axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else (axes or None))
    def permute(self, *axes): return self.transpose(*axes)
    def squeeze(self, axis=None): return squeeze(self, axis)
    def unsqueeze(self, axis): return expand_dims(self, axis)
    def expand(self, *shape): return expand(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)
    def flatten(self): return reshape(self, (-1,))

    @property
    def T(self) -> Tensor:
        if self.ndim != 2:
            raise ShapeError(f".T needs a 2-d tensor, got shape {self.shape}; use transpose(axes)")
        return transpose(self)

    @property
    def mT(self) -> Tensor:
        if self.ndim < 2:
            raise ShapeError(f".mT needs at least 2 dimensions, got shape {self.shape}")
        axes = list(range(self.ndim))
        axes[-1], axes[-2] = axes[-2], axes[-1]
        return transpose(self, axes)


def _device_name(device) -> str:
    """'cpu' or 'gpu' for a device given as a string ('cuda', 'cuda:0' and 'gpu:0' mean 'gpu') or an object
    with a .type (a torch.device)."""
    text = str(getattr(device, "type", device)).lower()
    name, _, index = text.partition(":")
    if name == "cpu" and not index:
        return "cpu"
    if name in ("gpu", "cuda") and index in ("", "0"):
        return "gpu"
    raise _dev.DeviceError(f"unknown device {device!r}; devices: 'cpu', 'gpu' (also 'cuda', 'cuda:0'; one GPU)")


def _host(t: Tensor) -> np.ndarray:
    """t's values in host memory (a copy for a gpu tensor)."""
    a = _realize(t)
    return a if t.device == "cpu" else _dev.download(a)


def _index_key(key):
    if isinstance(key, Tensor):
        return _host(key)
    if isinstance(key, tuple):
        return tuple(_host(k) if isinstance(k, Tensor) else k for k in key)
    return key


# ---- construction -----------------------------------------------------------------------------

def tensor(data, dtype=None, device=None) -> Tensor:
    """A tensor from nested lists, scalars, NumPy arrays, DLPack producers or other tensors, on `device`
    (default: where the data is: the host, or the gpu for a producer on the device)."""
    if device is not None:
        name = _device_name(device)
        t = tensor(data, dtype)
        return t if t.device == name else t.to(name)
    if isinstance(data, Tensor):
        return data if dtype is None else astype(data, dtype)
    if hasattr(data, "__dlpack__") and not isinstance(data, np.ndarray):
        if _dev.is_device_producer(data):
            t = from_dlpack(data)
            return t if dtype is None else astype(t, dtype)
        arr = np.from_dlpack(data)
    else:
        arr = np.asarray(data)
    if dtype is not None:
        dt = D.as_dtype(dtype)
        arr = arr.astype(dt, copy=False)
    elif arr.dtype.kind in "iu" and arr.dtype not in D.DTYPES:
        arr = arr.astype(np.int64)
    if arr.dtype not in D.DTYPES:
        raise DTypeError(f"tensor: dtype {arr.dtype} is not supported; dtypes: {', '.join(D.NAMES)}")
    return Tensor(arr)


def from_dlpack(x, *, device=None, copy=None) -> Tensor:
    """A tensor sharing memory with a DLPack producer: one in host memory (NumPy, torch CPU, ...) gives a
    host tensor, one on the GPU (torch CUDA, CuPy, ...) a gpu tensor. `device` asks for the other one:
    that copies, unless the device is simulated on the host (TRITON_INTERPRET=1), where a host producer's
    memory is shared as the gpu tensor's; copy=False refuses to copy, copy=True always copies."""
    want = None if device is None else _device_name(device)
    if isinstance(x, Tensor):
        t = x
    elif _dev.is_device_producer(x):
        t = Tensor(_dev.adopt(x), _device="gpu")
    elif want == "gpu" and not copy and _backend.get_backend("gpu").is_available() and \
            _dev.torch_device().type == "cpu":  # the interpreter's device memory is host memory: share it
        return Tensor(_dev.adopt(x), _device="gpu")
    else:
        t = Tensor(np.from_dlpack(x))
    if want is None or want == t.device:
        if copy:
            a = _realize(t)
            return Tensor(a.copy()) if t.device == "cpu" else Tensor(a.clone(), _device="gpu")
        return t
    if copy is False:
        raise _dev.DeviceError(f"from_dlpack: the data is in {t.device} memory and device={device!r} needs a copy, "
                               "but copy=False")
    return t.to(want)


def _as_operand(x, like: Tensor | None = None):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float, complex, np.generic)) and not isinstance(x, np.ndarray):
        return x
    return tensor(x)


# ---- graph nodes --------------------------------------------------------------------------------

def _node(op, args, shape, dtype, attrs=None) -> Tensor:
    device = "cpu"
    for a in args:
        if a.__class__ is Tensor and a.device != "cpu":
            device = a.device
            break
    if device != "cpu":
        for a in args:
            if a.__class__ is Tensor and a.device != device:
                raise _mixed(op if op not in ("move", "host") else attrs[0], args)
    on_host = dtype in D.COMPLEX and op != "move" and op != "host"
    if not on_host and op in C.TAKES_COMPLEX:
        for a in args:
            if a.dtype in D.COMPLEX:
                on_host = True
                break
    if on_host:
        if device != "cpu":
            raise DTypeError(f"{op}: complex numbers are computed on the host (the ISA has no complex arithmetic) and "
                             f"gpu tensors stay on the device; move the operands with .to('cpu') first")
        return _host_node(op, args, shape, dtype, attrs)
    t = Tensor(_op=op, _args=args, _shape=shape, _dtype=dtype, _attrs=attrs, _device=device)
    if is_eager():
        _realize(t)
    return t


def _host_node(op, args, shape, dtype, attrs) -> Tensor:
    """A complex operation: one NumPy call on the host when realized (eidos/tensor/complex.py says why)."""
    tensors, fn, name = C.host_call(op, args, dtype, attrs, lambda a: isinstance(a, Tensor))
    return _node("host", tensors, shape, dtype, (name, fn, C.WHY))


def _mixed(op: str, args) -> _dev.DeviceError:
    """Operands on different devices: eidos does not move data behind a user's back (as torch)."""
    where = ", ".join(f"{a.device} {a.shape}" for a in args if isinstance(a, Tensor))
    return _dev.DeviceError(f"{op}: operands are on different devices ({where}); move them to one first, "
                            f"e.g. x.to('gpu') or x.to('cpu')")


def _like(x: Tensor, arr: np.ndarray) -> Tensor:
    """A tensor of host-made values on x's device (constants an operation adds, like layer_norm's weight)."""
    return Tensor(arr) if x.device == "cpu" else Tensor(_dev.upload(arr), _device=x.device)


def _need(t: Tensor, what: str, *, floats=False, ints=False, no_bool=False) -> None:
    if floats and t.dtype not in D.FLOATS:
        raise DTypeError(f"{what} needs a floating-point tensor, got {t.dtype}")
    if ints and t.dtype not in D.INTEGERS and t.dtype != D.bool_:
        raise DTypeError(f"{what} needs an integer or boolean tensor, got {t.dtype}")
    if no_bool and t.dtype == D.bool_:
        raise DTypeError(f"{what} does not take bool tensors")


def _unary(op: str, x: Tensor, dtype=None) -> Tensor:
    if dtype is None:
        t = _small(op, x, None)
        if t is not None:
            return t
    return _node(op, (x,), x.shape, dtype or x.dtype)


def _small_data(op: str, a: Tensor, b):
    """The small eager path (docs/tensor.md): one element-wise operation whose operands are realized,
    contiguous, of one shape and dtype and at most SMALL_MAX_ELEMENTS, run at once by the cpu backend's
    kernel for it (the loop its one-instruction program runs), with no graph node, lowering or program
    object. (result array, explain record), or None where it does not apply (then the general path runs)."""
    da = a._data
    if da.__class__ is not np.ndarray or da.size > _SMALL_MAX or not da.flags.carray:
        return None   # (None: not realized; a torch tensor: on the gpu; carray: C-contiguous, aligned, writable)
    if b is not None:
        db = b._data
        if db.__class__ is not np.ndarray or b.shape != a.shape or b.dtype != a.dtype or not db.flags.carray:
            return None
    table = _SMALL_TABLES.get(op)
    k = 0 if table is None else table.get(a.dtype, 0)
    if k == 0:
        k = _small_kernel(op, a.dtype)
    if k is None:
        return None
    kernel, index, record = k
    out = np.empty(a.shape, a.dtype)
    if da.ndim == 1:
        if b is None:
            kernel(da.size, index, out, da)
        else:
            kernel(da.size, index, out, da, db)
    elif b is None:
        kernel(da.size, index, out.reshape(-1), da.reshape(-1))
    else:
        kernel(da.size, index, out.reshape(-1), da.reshape(-1), db.reshape(-1))
    _counters["programs"] += 1
    return out, record


def _eager_binary(op: str, slow=None, floats_only: bool = False):
    """The operator method for `op` (Tensor.__add__, ...): the small eager path of _small written out in the
    method itself for its commonest case (two realized host tensors of one dtype object and one shape): one
    Python frame, no keyword arguments or isinstance chains, the op's kernel memo read by dtype. Anything else
    goes to the general path, `_binary` (or `slow(self, o)`). Same conditions, results and explain() record as _small
    (docs/tensor.md, "Small eager operations")."""
    ndarray, new, local, table, counters, limit = np.ndarray, Tensor.__new__, _local, _small_table(op), _counters, _SMALL_MAX

    def method(self, o):
        if local.eager and o.__class__ is Tensor:
            da, db, dt = self._data, o._data, self.dtype
            if (da.__class__ is ndarray and db.__class__ is ndarray and o.dtype is dt and o.shape == self.shape
                    and da.size <= limit and (not floats_only or dt.kind == "f")
                    and da.flags.carray and db.flags.carray):
                k = table.get(dt, 0)
                if k == 0:
                    k = _small_kernel(op, dt)
                if k is not None:
                    out = np.empty(self.shape, dt)
                    if da.ndim == 1:
                        k[0](da.size, k[1], out, da, db)
                    else:
                        k[0](da.size, k[1], out.reshape(-1), da.reshape(-1), db.reshape(-1))
                    counters["programs"] += 1
                    t = new(Tensor)
                    t.shape, t.dtype, t.device, t._data, t._op, t._args, t._attrs, t._runs = \
                        self.shape, dt, "cpu", out, op, (), None, [k[2]]
                    return t
        return _binary(op, self, o) if slow is None else slow(self, o)
    method.__name__ = method.__qualname__ = f"__{op}__"
    return method


Tensor.__add__, Tensor.__sub__, Tensor.__mul__ = _eager_binary("add"), _eager_binary("sub"), _eager_binary("mul")


def _small(op: str, a: Tensor, b) -> Tensor | None:
    """A realized Tensor by the small eager path, or None (not in eager mode, or the path does not apply)."""
    if not getattr(_local, "eager", False):
        return None
    r = _small_data(op, a, b)
    if r is None:
        return None
    t = Tensor.__new__(Tensor)
    t.shape, t.dtype, t.device, t._data, t._op, t._args, t._attrs, t._runs = \
        a.shape, a.dtype, "cpu", r[0], op, (), None, [r[1]]
    return t


def _operands(a, b, what):
    if type(a) is Tensor and type(b) is Tensor and a.shape == b.shape and a.dtype == b.dtype:
        return a, b, a.dtype, a.shape  # the common case, without promotion or broadcasting work
    a, b = _as_operand(a), _as_operand(b)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = tensor(a)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        dt = D.promote(a.dtype, b.dtype)
        shape = _broadcast_shapes(a.shape, b.shape, what=what)
    else:
        t, s = (a, b) if isinstance(a, Tensor) else (b, a)
        dt = D.scalar_dtype(s, t.dtype)
        shape = t.shape
    return _cast_to(a, dt), _cast_to(b, dt), dt, shape


def _cast_to(x, dt):
    if isinstance(x, Tensor):
        if dt in D.COMPLEX and x.dtype not in D.COMPLEX:
            return x  # a real operand of a complex operation stays real (see complex.host_call)
        return x if x.dtype == dt else astype(x, dt)
    return Const(_imm_value(x, dt), dt)


def _imm_value(x, dt):
    if dt == D.bool_:
        return bool(x)
    if dt in D.FLOATS:
        return float(x)
    if dt in D.COMPLEX:
        return x if isinstance(x, complex) else float(x)  # a real scalar stays real (see complex.host_call)
    v = int(x)
    info = np.iinfo(dt)
    if not info.min <= v <= info.max:
        raise DTypeError(f"Python int {v} is out of range for {dt} ({info.min}..{info.max})")
    return v


def _binary(op: str, a, b, out_dtype=None) -> Tensor:
    if type(a) is Tensor and type(b) is Tensor and out_dtype is None:
        t = _small(op, a, b)
        if t is not None:
            return t
    a, b, dt, shape = _operands(a, b, op)
    if op in ("floordiv", "mod") and dt == D.bool_:
        raise DTypeError(f"{op} does not take bool tensors")
    if op in ("add", "sub", "mul") and dt == D.bool_:
        if op == "sub":
            raise DTypeError("subtract does not take bool tensors; use ^ or logical_xor")
        op = "logical_or" if op == "add" else "logical_and"
    return _node(op, (a, b), shape, out_dtype or dt)


def _compare(op, a, b) -> Tensor:
    return _binary(op, a, b, D.bool_)


def _bitwise(op, a, b) -> Tensor:
    a2, b2, dt, shape = _operands(a, b, op)
    if dt in D.FLOATS:
        raise DTypeError(f"bitwise {op} needs integer or bool tensors, got {dt}")
    if dt == D.bool_:
        if op in ("lshift", "rshift"):
            raise DTypeError(f"{op} needs integer tensors, got bool")
        return _node("logical_" + op, (a2, b2), shape, D.bool_)
    return _node(op, (a2, b2), shape, dt)


def astype(x: Tensor, dtype, copy: bool = True) -> Tensor:
    dt = D.as_dtype(dtype)
    x = _as_operand(x)
    if x.dtype == dt:
        return x
    return _node("cast", (x,), x.shape, dt)


def _float_of(x: Tensor) -> Tensor:
    return x if x.dtype in D.INEXACT else astype(x, D.float64)


def _math(op):
    def f(x):
        x = _as_operand(x)
        if not isinstance(x, Tensor):
            x = tensor(x)
        return _unary(op, _float_of(x))
    f.__name__ = op
    f.__doc__ = f"Element-wise {op} (integer inputs are computed in floating point)."
    return f


sqrt, exp, log, sin, cos, tan, tanh, sigmoid, gelu = (_math(o) for o in
                                                     ("sqrt", "exp", "log", "sin", "cos", "tan", "tanh", "sigmoid", "gelu"))


def _float_or_same(op):
    def f(x):
        x = tensor(x) if not isinstance(x, Tensor) else x
        _need(x, op, no_bool=True)
        if x.dtype not in D.INEXACT:
            return x
        return _unary(op, x)
    f.__name__ = op
    return f


floor, ceil, trunc = (_float_or_same(o) for o in ("floor", "ceil", "trunc"))


def round(x, decimals: int = 0) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    _need(x, "round", no_bool=True)
    if x.dtype not in D.INEXACT:
        return x
    if decimals == 0:
        return _unary("round", x)
    s = 10.0 ** decimals
    return _unary("round", x * s) / s


def abs(x) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype == D.bool_ or x.dtype in D.UNSIGNED:
        return x
    return _unary("abs", x, D.REAL_OF.get(x.dtype))


def _numeric_unary(op: str, name: str):
    def f(x) -> Tensor:
        x = tensor(x) if not isinstance(x, Tensor) else x
        _need(x, name, no_bool=True)
        return _unary(op, x)
    f.__name__ = name
    f.__doc__ = f"Element-wise {name} (not for bool tensors)."
    return f


negative, sign, relu, square = (_numeric_unary(op, name) for op, name in
                                (("neg", "negative"), ("sign", "sign"), ("relu", "relu"), ("square", "square")))


def _float_test(op: str, non_float: bool):
    def f(x) -> Tensor:
        x = tensor(x) if not isinstance(x, Tensor) else x
        if x.dtype not in D.INEXACT:
            return _like(x, np.full(x.shape, non_float, np.bool_))
        return _unary(op, x, D.bool_)
    f.__name__ = op
    f.__doc__ = f"Element-wise {op} (integers and bools: all {non_float})."
    return f


isnan, isinf, isfinite = _float_test("isnan", False), _float_test("isinf", False), _float_test("isfinite", True)


def logical_not(x) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    return _unary("logical_not", x, D.bool_)


def logical_and(a, b): return _node_logical("logical_and", a, b)
def logical_or(a, b): return _node_logical("logical_or", a, b)
def logical_xor(a, b): return _node_logical("logical_xor", a, b)


def _node_logical(op, a, b):
    a, b = _as_operand(a), _as_operand(b)
    a = astype(a, D.bool_) if isinstance(a, Tensor) else a
    b = astype(b, D.bool_) if isinstance(b, Tensor) else b
    return _binary(op, a, b, D.bool_)


def add(a, b): return _binary("add", a, b)
def subtract(a, b): return _binary("sub", a, b)
def multiply(a, b): return _binary("mul", a, b)
def floor_divide(a, b): return _binary("floordiv", a, b)
def remainder(a, b): return _binary("mod", a, b)
def equal(a, b): return _compare("eq", a, b)
def not_equal(a, b): return _compare("ne", a, b)
def less(a, b): return _compare("lt", a, b)
def less_equal(a, b): return _compare("le", a, b)
def greater(a, b): return _compare("gt", a, b)
def greater_equal(a, b): return _compare("ge", a, b)


def divide(a, b) -> Tensor:
    """True division: integers divide in floating point (float64, as NumPy)."""
    a, b = _as_operand(a), _as_operand(b)
    if isinstance(a, Tensor) and a.dtype not in D.INEXACT and not (isinstance(b, Tensor) and b.dtype in D.INEXACT) \
            and not isinstance(b, (float, complex)):
        a = astype(a, D.float64)
    if isinstance(b, Tensor) and b.dtype not in D.INEXACT and not (isinstance(a, Tensor) and a.dtype in D.INEXACT) \
            and not isinstance(a, (float, complex)):
        b = astype(b, D.float64)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = tensor(float(a))
    return _binary("div", a, b)


Tensor.__truediv__ = _eager_binary("div", divide, floats_only=True)   # (integers: true division, the general path)


def maximum(a, b): return _minmax("maximum", a, b)
def minimum(a, b): return _minmax("minimum", a, b)


def _minmax(op, a, b):
    a2, b2, dt, shape = _operands(a, b, op)
    if dt == D.bool_:
        return _node("logical_or" if op == "maximum" else "logical_and", (a2, b2), shape, dt)
    return _node(op, (a2, b2), shape, dt)


def pow(a, b) -> Tensor:
    """a ** b: the ISA's Pow (floats); integers are raised in float64 and converted back."""
    a2, b2, dt, shape = _operands(a, b, "pow")
    if dt == D.bool_:
        raise DTypeError("pow does not take bool tensors")
    if isinstance(b2, Const) and b2.value == 2:
        return _node("square", (a2,), shape, dt) if a2.shape == shape else _node("mul", (a2, a2), shape, dt)
    if dt in D.INEXACT:
        return _node("pow", (a2, b2), shape, dt)
    f = [astype(x, D.float64) if isinstance(x, Tensor) else Const(float(x.value), D.float64) for x in (a2, b2)]
    return astype(_node("pow", tuple(f), shape, D.float64), dt)


def atan2(a, b) -> Tensor:
    a2, b2, dt, shape = _operands(a, b, "atan2")
    if dt not in D.FLOATS:
        a2, b2 = _cast_to(a2 if isinstance(a2, Tensor) else a2.value, D.float64), _cast_to(
            b2 if isinstance(b2, Tensor) else b2.value, D.float64)
        dt = D.float64
    return _node("atan2", (a2, b2), shape, dt)


def where(cond, a, b) -> Tensor:
    cond = _as_operand(cond)
    cond = tensor(cond) if not isinstance(cond, Tensor) else cond
    cond = astype(cond, D.bool_)
    a2, b2, dt, shape = _operands(a, b, "where")
    shape = _broadcast_shapes(cond.shape, shape, what="where")
    return _node("where", (cond, a2, b2), shape, dt)


def clip(x, min=None, max=None) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype in D.COMPLEX:
        raise DTypeError(f"clip is not defined for complex tensors ({x.dtype}): complex numbers have no order")
    if min is None and max is None:
        return x
    lo = min if min is not None else (-np.inf if x.dtype in D.FLOATS else np.iinfo(x.dtype).min)
    hi = max if max is not None else (np.inf if x.dtype in D.FLOATS else np.iinfo(x.dtype).max)
    if isinstance(lo, Tensor) or isinstance(hi, Tensor):
        return minimum(maximum(x, lo), hi)
    _, lo2, dt, _ = _operands(x, lo, "clip")
    _, hi2, _, _ = _operands(x, hi, "clip")
    if dt != x.dtype:
        x = astype(x, dt)
    return _node("clip", (x, lo2, hi2), x.shape, dt)


# ---- reductions -----------------------------------------------------------------------------------

def _reduce(op, x, axis, keepdims, out_dtype, divisor: float = 0) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    axes = _norm_axes(axis, x.ndim, op)
    if keepdims:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if op in ("min", "max", "argmin", "argmax") and x.size == 0:
        raise ShapeError(f"{op} of an empty tensor (shape {x.shape}) has no identity")
    if op in ("min", "max", "argmin", "argmax") and math.prod(x.shape[a] for a in axes) == 0:
        raise ShapeError(f"{op} over an empty axis of shape {x.shape}")
    return _node("reduce", (x,), shape, out_dtype, (op, axes, bool(keepdims), divisor))


def _sum_dtype(dt, dtype):
    if dtype is not None:
        return D.as_dtype(dtype)
    if dt == D.bool_ or dt in D.SIGNED:
        return D.int64
    if dt in D.UNSIGNED:
        return D.uint64
    return dt


def sum(x, axis=None, keepdims=False, dtype=None) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    dt = _sum_dtype(x.dtype, dtype)
    if dtype is not None and dt != x.dtype:
        x = astype(x, dt)
    return _reduce("sum", x, axis, keepdims, dt)


def prod(x, axis=None, keepdims=False, dtype=None) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    dt = _sum_dtype(x.dtype, dtype)
    if dtype is not None and dt != x.dtype:
        x = astype(x, dt)
    return _reduce("prod", x, axis, keepdims, dt)


def min(x, axis=None, keepdims=False) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype == D.bool_:
        return all(x, axis, keepdims)
    return _reduce("min", x, axis, keepdims, x.dtype)


def max(x, axis=None, keepdims=False) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype == D.bool_:
        return any(x, axis, keepdims)
    return _reduce("max", x, axis, keepdims, x.dtype)


def any(x, axis=None, keepdims=False) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    return _reduce("max", astype(x, D.bool_).astype(D.uint8), axis, keepdims, D.uint8).astype(D.bool_) \
        if x.size else _reduce("sum", astype(x, D.bool_), axis, keepdims, D.int64).astype(D.bool_)


def all(x, axis=None, keepdims=False) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.size == 0:
        return logical_not(_reduce("sum", logical_not(x), axis, keepdims, D.int64))
    return _reduce("min", astype(x, D.bool_).astype(D.uint8), axis, keepdims, D.uint8).astype(D.bool_)


def argmin(x, axis=None, keepdims=False) -> Tensor:
    return _arg("argmin", x, axis, keepdims)


def argmax(x, axis=None, keepdims=False) -> Tensor:
    return _arg("argmax", x, axis, keepdims)


def _arg(op, x, axis, keepdims):
    x = tensor(x) if not isinstance(x, Tensor) else x
    if axis is not None and isinstance(axis, (tuple, list)):
        raise AxisError(f"{op}: axis must be one int or None, got {axis!r}")
    if axis is None:
        r = _reduce(op, reshape(x, (-1,)) if x.ndim != 1 else x, 0, False, D.int64)
        return reshape(r, (1,) * x.ndim) if keepdims else r
    if x.dtype == D.bool_:
        x = astype(x, D.uint8)
    return _reduce(op, x, axis, keepdims, D.int64)


def mean(x, axis=None, keepdims=False) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    xf = _float_of(x)
    axes = _norm_axes(axis, x.ndim, "mean")
    n = math.prod(x.shape[a] for a in axes)
    if not n:
        return _reduce("sum", xf, axis, keepdims, xf.dtype) * np.nan
    return _reduce("sum", xf, axis, keepdims, xf.dtype, n)  # the sum and the division: one program


def var(x, axis=None, keepdims=False, correction=0) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype in D.COMPLEX:
        raise DTypeError(f"var/std take real tensors, got {x.dtype}; use var(abs(x)) or var of real(x) and imag(x)")
    xf = _float_of(x)
    axes = _norm_axes(axis, x.ndim, "var")
    n = math.prod(x.shape[a] for a in axes)
    m = mean(xf, axis, keepdims=True)
    d = n - correction
    if d <= 0:
        return _reduce("sum", square(xf - m), axis, keepdims, xf.dtype) * np.nan
    return _reduce("sum", square(xf - m), axis, keepdims, xf.dtype, d)


def std(x, axis=None, keepdims=False, correction=0) -> Tensor:
    return sqrt(var(x, axis, keepdims, correction))


# ---- matmul, softmax, layer_norm ----------------------------------------------------------------

def matmul(a, b) -> Tensor:
    a = tensor(a) if not isinstance(a, Tensor) else a
    b = tensor(b) if not isinstance(b, Tensor) else b
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul needs at least 1-d operands, got shapes {a.shape} and {b.shape}")
    dt = D.promote(a.dtype, b.dtype)
    if dt == D.bool_:
        raise DTypeError("matmul does not take bool tensors")
    a1, b1 = a.shape if a.ndim > 1 else (1, *a.shape), b.shape if b.ndim > 1 else (*b.shape, 1)
    if a1[-1] != b1[-2]:
        raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} do not align ({a1[-1]} != {b1[-2]})")
    batch = _broadcast_shapes(a1[:-2], b1[:-2], what="matmul batch dimensions")
    shape = (*batch, a1[-2], b1[-1])
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    return _node("matmul", (astype(a, dt), astype(b, dt)), shape, dt)


def softmax(x, axis=-1) -> Tensor:
    x = _float_of(tensor(x) if not isinstance(x, Tensor) else x)
    (ax,) = _norm_axes(axis, x.ndim, "softmax") if x.ndim else (0,)
    return _node("softmax", (x,), x.shape, x.dtype, (ax,))


def layer_norm(x, normalized_shape=None, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing `normalized_shape` dimensions (default: the last), then * weight + bias."""
    x = _float_of(tensor(x) if not isinstance(x, Tensor) else x)
    if normalized_shape is None:
        normalized_shape = x.shape[-1:]
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    ns = tuple(normalized_shape)
    if x.ndim < len(ns) or x.shape[x.ndim - len(ns):] != ns:
        raise ShapeError(f"layer_norm: normalized_shape {ns} does not match the trailing dimensions of {x.shape}")
    n = math.prod(ns)
    args = [x]
    for p, fill in ((weight, 1.0), (bias, 0.0)):
        if p is None:
            p = _like(x, np.full(n, fill, dtype=x.dtype))
        p = astype(tensor(p) if not isinstance(p, Tensor) else p, x.dtype)
        if p.size != n:
            raise ShapeError(f"layer_norm: weight/bias of shape {p.shape} for normalized_shape {ns}")
        args.append(p)
    return _node("layer_norm", tuple(args), x.shape, x.dtype, (n, float(eps)))


# ---- movement (host layout, between programs) ------------------------------------------------------

def _move(name, args, shape, dtype, fn, desc="", param=None) -> Tensor:
    """A layout node: fn(*arrays) is its NumPy form; eidos.tensor.storage.move(name, param, ...) its device form."""
    return _node("move", tuple(args), shape, dtype, (name, fn, desc, param))


def reshape(x, shape) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    try:
        new = np.empty(x.shape, dtype=np.bool_).reshape(shape).shape if x.size else np.empty(x.shape).reshape(shape).shape
    except ValueError:
        raise ShapeError(f"cannot reshape a tensor of shape {x.shape} ({x.size} elements) to {shape}") from None
    return _move("reshape", [x], new, x.dtype, lambda a: a.reshape(new), str(new))


def transpose(x, axes=None) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    if axes is None:
        axes = tuple(range(x.ndim))[::-1]
    axes = tuple(int(a) for a in axes)
    if sorted(a % x.ndim if x.ndim else a for a in axes) != list(range(x.ndim)) or len(axes) != x.ndim:
        raise AxisError(f"transpose: axes {axes} are not a permutation of the {x.ndim} dimensions of shape {x.shape}")
    shape = tuple(x.shape[a] for a in axes)
    return _move("transpose", [x], shape, x.dtype, lambda a: np.transpose(a, axes), str(axes), axes)


def permute_dims(x, axes) -> Tensor:
    return transpose(x, axes)


def squeeze(x, axis=None) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    axes = tuple(i for i, d in enumerate(x.shape) if d == 1) if axis is None else _norm_axes(axis, x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise ShapeError(f"squeeze: axis {a} of shape {x.shape} has size {x.shape[a]}, not 1")
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return _move("squeeze", [x], shape, x.dtype, lambda a: a.reshape(shape), str(axes))


def expand_dims(x, axis=0) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    n = x.ndim + 1
    if not -n <= axis < n:
        raise AxisError(f"expand_dims: axis {axis} out of range for a result of {n} dimensions")
    axis %= n
    shape = x.shape[:axis] + (1,) + x.shape[axis:]
    return _move("expand_dims", [x], shape, x.dtype, lambda a: a.reshape(shape), str(axis))


def expand(x, shape) -> Tensor:
    """Broadcast to `shape` (-1 keeps a dimension)."""
    x = tensor(x) if not isinstance(x, Tensor) else x
    shape = tuple(shape)
    pad = len(shape) - x.ndim
    if pad < 0:
        raise ShapeError(f"expand: cannot expand shape {x.shape} to fewer dimensions {shape}")
    shape = tuple(x.shape[i - pad] if s == -1 else s for i, s in enumerate(shape))
    if _broadcast_shapes(x.shape, shape, what="expand") != shape:
        raise ShapeError(f"expand: shape {x.shape} does not broadcast to {shape}")
    return _move("expand", [x], shape, x.dtype, lambda a: np.broadcast_to(a, shape), str(shape))


broadcast_to = expand


def concat(tensors, axis=0) -> Tensor:
    ts = [tensor(t) if not isinstance(t, Tensor) else t for t in tensors]
    if not ts:
        raise ShapeError("concat needs at least one tensor")
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = D.promote(dt, t.dtype)
    if axis is None:
        ts = [reshape(t, (-1,)) for t in ts]
        axis = 0
    nd = ts[0].ndim
    if nd == 0:
        raise ShapeError("concat of 0-d tensors; use stack")
    (ax,) = _norm_axes(axis, nd, "concat")
    for t in ts:
        if t.ndim != nd or _builtins.any(t.shape[i] != ts[0].shape[i] for i in range(nd) if i != ax):
            raise ShapeError(f"concat along axis {ax}: shapes {', '.join(str(t.shape) for t in ts)} differ off that axis")
    shape = tuple(builtins_sum(t.shape[ax] for t in ts) if i == ax else d for i, d in enumerate(ts[0].shape))
    return _move("concat", [astype(t, dt) for t in ts], shape, dt, lambda *a: np.concatenate(a, axis=ax), str(ax), ax)


def stack(tensors, axis=0) -> Tensor:
    ts = [tensor(t) if not isinstance(t, Tensor) else t for t in tensors]
    if not ts:
        raise ShapeError("stack needs at least one tensor")
    if _builtins.any(t.shape != ts[0].shape for t in ts):
        raise ShapeError(f"stack: shapes {', '.join(str(t.shape) for t in ts)} differ")
    n = ts[0].ndim + 1
    if not -n <= axis < n:
        raise AxisError(f"stack: axis {axis} out of range for a result of {n} dimensions")
    return concat([expand_dims(t, axis) for t in ts], axis % n)


builtins_sum = _builtins.sum


# ---- constructors -----------------------------------------------------------------------------

def zeros(shape, dtype=D.float32) -> Tensor:
    return Tensor(np.zeros(shape, dtype=D.as_dtype(dtype)))


def ones(shape, dtype=D.float32) -> Tensor:
    return Tensor(np.ones(shape, dtype=D.as_dtype(dtype)))


def full(shape, value, dtype=None) -> Tensor:
    dt = D.as_dtype(dtype) if dtype is not None else tensor(value).dtype
    return Tensor(np.full(shape, value, dtype=dt))


def arange(start, stop=None, step=1, dtype=None) -> Tensor:
    a = np.arange(start, stop, step) if stop is not None else np.arange(start)
    return tensor(a, dtype=dtype)


def rand(*shape, seed=None) -> Tensor:
    return Tensor(np.random.default_rng(seed).random(shape, dtype=np.float32))


def randn(*shape, seed=None) -> Tensor:
    return Tensor(np.random.default_rng(seed).standard_normal(shape, dtype=np.float32))


# ---- realization ----------------------------------------------------------------------------------

EW_OPS = L.UNARY | L.BINARY | L.TERNARY
_N = D.NAME
MAP_ONLY = {"pow", "atan2"}


def realize(*tensors) -> None:
    """Run the graphs behind these tensors (each fused chain once)."""
    for t in tensors:
        if isinstance(t, Tensor):
            _realize(t)
        elif isinstance(t, (list, tuple)):
            realize(*t)


def _realize(t: Tensor) -> np.ndarray:
    if t._data is not None:
        return t._data
    op = t._op
    if op in EW_OPS:
        _run_elementwise(t)
    elif op == "reduce":
        _run_reduce(t)
    elif op == "move":
        name, fn, _desc, param = t._attrs
        arrays = [_realize(a) for a in t._args]
        if t.device == "cpu":
            t._data = fn(*arrays)
            t._runs.append((f"{name}", "host layout (NumPy view or copy), no program"))
        else:
            t._data = _dev.move(name, param, t.shape, arrays)
            t._runs.append((f"{name}", "device layout (torch view or copy), no program"))
    elif op == "host":
        name, fn, why = t._attrs
        with np.errstate(all="ignore"):
            t._data = fn(*[_realize(a) for a in t._args])
        t._runs.append((name, why))
    elif op == "matmul":
        _run_matmul(t)
    elif op == "softmax":
        _run_softmax(t)
    elif op == "layer_norm":
        _run_layer_norm(t)
    else:
        raise EidosError(f"internal: no realization for {op}")
    t._args = ()
    return t._data


class _Leaves:
    """A kernel's inputs: tensors, each with the shape it is viewed as (a reshape fused through), by slot."""

    def __init__(self) -> None:
        self.by_id: dict = {}
        self.tensors: list = []
        self.views: list = []

    def slot(self, t: Tensor, view=None) -> int:
        key = (id(t), view)
        s = self.by_id.get(key)
        if s is None:
            s = self.by_id[key] = len(self.tensors)
            self.tensors.append(t)
            self.views.append(view)
        return s

    def arrays(self):
        return [t._data if v is None else t._data.reshape(v) for t, v in zip(self.tensors, self.views)]


RESHAPES = ("reshape", "squeeze", "expand_dims")


def _collect(u, leaves: _Leaves, split_map_only: bool, root: bool = False, view=None):
    """The expression of u's element-wise subgraph. Reshapes of an element-wise subgraph whose inputs all
    have its full shape are fused through: each input is viewed with the reshape's shape (`view`)."""
    if isinstance(u, Const):
        return ("const", u.value, _N[u.dtype])
    if u._data is None and u._op in EW_OPS and not (split_map_only and u._op in MAP_ONLY and not root):
        return (u._op, _N[u.dtype], *[_collect(a, leaves, split_map_only, False, view) for a in u._args])
    if u._data is None and u._op == "move" and u._attrs[0] in RESHAPES:
        src = u._args[0]
        while src._data is None and src._op == "move" and src._attrs[0] in RESHAPES:
            src = src._args[0]
        if src._data is None and src._op in EW_OPS and _uniform(src, src.shape):
            return _collect(src, leaves, split_map_only, root, view if view is not None else u.shape)
    _realize(u)
    return ("in", leaves.slot(u, view), _N[u.dtype])


def _uniform(u, shape) -> bool:
    """Whether every input of u's element-wise subgraph has exactly `shape` (no broadcasting inside)."""
    if isinstance(u, Const):
        return True
    if u.shape != shape:
        return False
    if u._data is None and u._op in EW_OPS:
        return _builtins.all(_uniform(a, shape) for a in u._args)
    return True


def _has(expr, ops) -> bool:
    return _builtins.any(e[0] in ops for e in L.walk(expr))


def _gather(t: Tensor, kernel_of):
    """Collect t's element-wise subgraph; split pow/atan2 out when the rest needs the lane form."""
    leaves = _Leaves()
    expr = _collect(t, leaves, False, True)
    k = kernel_of(expr, leaves)
    if not _has(expr, MAP_ONLY) or L.map_form_ok(k):
        return k, leaves
    leaves = _Leaves()
    if t._op in MAP_ONLY:  # pow/atan2 itself: its operands become inputs
        expr = (t._op, _N[t.dtype], *[("const", a.value, _N[a.dtype]) if isinstance(a, Const) else
                                      _leaf_expr(a, leaves) for a in t._args])
    else:
        expr = _collect(t, leaves, True, True)
    return kernel_of(expr, leaves), leaves


def _leaf_expr(a: Tensor, leaves: _Leaves):
    _realize(a)
    return ("in", leaves.slot(a), _N[a.dtype])


def _run_elementwise(t: Tensor) -> None:
    n = t.size
    args = t._args
    if n <= _SMALL_MAX and 0 < len(args) <= 2 and type(args[0]) is Tensor and t.dtype == args[0].dtype \
            and args[0].shape == t.shape and (len(args) == 1 or type(args[1]) is Tensor):
        r = _small_data(t._op, args[0], args[1] if len(args) == 2 else None)
        if r is not None:
            t._data = r[0]
            t._runs.append(r[1])
            return

    def kernel_of(expr, leaves):
        return L.Kernel(expr, len(leaves.tensors), _N[t.dtype], n)

    k, leaves = _gather(t, kernel_of)
    xp = _dev.storage(t.device)
    out = xp.empty(t.shape, t.dtype)
    if n == 0:
        t._data = out
        return
    if k.expr[0] == "in":
        t._data = xp.layout(leaves.arrays()[0], t.shape)
        return
    args = [xp.layout(a, t.shape) for a in leaves.arrays()]
    _execute(t, k, args, out)
    t._data = out


def _run_reduce(t: Tensor) -> None:
    op, axes, keepdims, divisor = t._attrs
    x = t._args[0]
    kept = [i for i in range(x.ndim) if i not in axes]
    perm = kept + list(axes)
    m = math.prod(x.shape[i] for i in kept)
    r = math.prod(x.shape[i] for i in axes)

    def kernel_of(expr, leaves):
        return L.Kernel(expr, len(leaves.tensors), _N[t.dtype], m, op, r, divisor)

    if x._data is None and (x._op in EW_OPS or (x._op == "move" and x._attrs[0] in RESHAPES)):
        k, leaves = _gather(x, kernel_of)
        if not L.map_form_ok(k) and _has(k.expr, MAP_ONLY):
            leaves = _Leaves()
            k = kernel_of(_leaf_expr(x, leaves), leaves)
    else:
        leaves = _Leaves()
        k = kernel_of(_leaf_expr(x, leaves), leaves)
    xp = _dev.storage(t.device)
    out = xp.empty(m, t.dtype)
    if m > 0:
        identity = perm == list(range(x.ndim))
        args = [xp.layout(a, x.shape, None if identity else perm) for a in leaves.arrays()]
        _execute(t, k, args, out)
    t._data = out.reshape(t.shape)


def _execute(t: Tensor, k: L.Kernel, args: list, out: np.ndarray) -> None:
    low, values = L.lower(k)
    full = list(args)
    full.append(out.reshape(-1))
    if low.temps:
        full += [_SCRATCH.scratch(dtype, count, slot, t.device) for slot, dtype, count in low.temps]
    nbytes = 0
    for a in args:
        nbytes += a.nbytes
    registers = {reg: L.register_value(values[i], dt) for i, reg, dt in low.params} if low.params else None
    _dispatch(t, low, full, k.kind, nbytes, k, registers)


def _describe(low: L.Lowered, what) -> str:
    if not isinstance(what, L.Kernel):
        return what
    k = what
    return (f"{low.form} form, {k.kind}" + (f" ({k.reduce} over {k.length} per output)" if k.reduce else "")
            + f", {_nops(k.expr)} op(s), {k.count} output element(s)")


def _nops(expr) -> int:
    return builtins_sum(1 for e in L.walk(expr) if e[0] not in ("in", "const"))


def _dispatch(t: Tensor, low: L.Lowered, args, kind: str, nbytes: int, what, registers=None) -> None:
    props = _backend.OperationProperties(kind, nbytes, False, t.device)
    launch = low.config if not registers else ExecutionParams(low.config, registers)
    scratch = tuple(slot for slot, _, _ in low.temps) if low.temps else ()
    sel = _backend.run(low.program, args, launch, props, (low.out_slot,), scratch)
    _counters["programs"] += 1
    t._runs.append((low, what, sel))


class _ArrayCache:
    """Scratch arrays kept for reuse (an element-wise map's intermediates), least recently used first out,
    within a byte budget."""

    def __init__(self, budget_bytes: int) -> None:
        from collections import OrderedDict

        self.entries = OrderedDict()
        self.budget = budget_bytes
        self.nbytes = 0

    def _get(self, key, make):
        a = self.entries.get(key)
        if a is not None:
            self.entries.move_to_end(key)
            return a
        a = self.entries[key] = make()
        self.nbytes += a.nbytes
        while self.nbytes > self.budget and len(self.entries) > 1:
            _, old = self.entries.popitem(last=False)
            self.nbytes -= old.nbytes
        return a

    def scratch(self, dtype, count, slot, device="cpu"):
        return self._get((dtype, count, slot, device), lambda: _dev.storage(device).empty(count, D.NAMES[dtype]))

    def clear(self) -> None:
        self.entries.clear()
        self.nbytes = 0


_SCRATCH = _ArrayCache(256 << 20)


def _contig(t: Tensor):
    return _dev.storage(t.device).contiguous(_realize(t))


def _run_matmul(t: Tensor) -> None:
    a, b = t._args
    A, Bm = _realize(a), _realize(b)
    A2 = A.reshape(1, -1) if A.ndim == 1 else A
    B2 = B.reshape(-1, 1) if (B := Bm).ndim == 1 else B
    m, k, n = A2.shape[-2], A2.shape[-1], B2.shape[-1]
    batch = _broadcast_shapes(A2.shape[:-2], B2.shape[:-2])
    dt = t.dtype
    cdt = dt if dt in D.FLOATS else D.float64
    xp = _dev.storage(t.device)
    A3 = xp.contiguous(xp.broadcast_to(A2, (*batch, m, k)), cdt)
    B3 = xp.contiguous(xp.broadcast_to(B2, (*batch, k, n)), cdt)
    nb = math.prod(batch)
    out = xp.empty((*batch, m, n), cdt)
    if t.size:
        if k == 0:
            out[...] = 0
        elif nb == 1:
            low = L.lower_extension("gemm", str(cdt), (m, n, k))
            _dispatch(t, low, [A3, B3, out], "matmul", A3.nbytes + B3.nbytes, f"GEMM {m}x{k} @ {k}x{n}")
        else:
            low = L.lower_extension("batched_gemm", str(cdt), (nb, m, n, k))
            _dispatch(t, low, [A3, B3, out], "matmul", A3.nbytes + B3.nbytes,
                      f"BatchedGEMM {nb} x ({m}x{k} @ {k}x{n})")
    if cdt != dt:
        out = xp.astype(out, dt)
    t._data = out.reshape(t.shape)


def _run_softmax(t: Tensor) -> None:
    (ax,) = t._attrs
    x = _realize(t._args[0])
    xp = _dev.storage(t.device)
    if x.ndim == 0:
        t._data = xp.full((), 1, t.dtype)
        return
    moved = xp.contiguous(xp.moveaxis(x, ax, -1))
    out = xp.empty(moved.shape, t.dtype)
    n = moved.shape[-1]
    rows = t.size // n if n else 0
    if rows:
        low = L.lower_extension("softmax", _N[t.dtype], (rows, n))
        _dispatch(t, low, [moved, out], "softmax", moved.nbytes, f"Softmax {rows} rows of {n}")
    t._data = xp.moveaxis(out, -1, ax)


def _run_layer_norm(t: Tensor) -> None:
    n, eps = t._attrs
    x, w, b = (_contig(a) for a in t._args)
    out = _dev.storage(t.device).empty(x.shape, t.dtype)
    rows = t.size // n if n else 0
    if rows:
        low = L.lower_extension("layer_norm", _N[t.dtype], (rows, n, eps))
        _dispatch(t, low, [x, w.reshape(-1), b.reshape(-1), out], "layer_norm", x.nbytes,
                  f"LayerNorm {rows} rows of {n}")
    t._data = out


# ---- explain ------------------------------------------------------------------------------------

def explain(t: Tensor) -> str:
    """What ran (or will run) for this tensor: programs, their form, backend chosen and rejected."""
    lines = [f"Tensor shape={t.shape} dtype={t.dtype} device={t.device!r} "
             f"({'realized' if t._data is not None else 'lazy'})"]
    if t.device != "cpu":
        lines[0] += f"; gpu is {_dev.describe()}"
    if t._data is None:
        lines.append("graph (runs when a value is needed):")
        lines += _tree(t, 1)
    for run in t._runs:
        if len(run) == 3:
            low, what, sel = run
            lines.append(f"  ran: {_describe(low, what)}")
            lines.append(f"       {sel}")
        else:
            lines.append(f"  ran: {run[0]}")
            lines.append(f"       {run[1]}")
    if t._data is not None and not t._runs:
        lines.append("  (a leaf: data given, nothing ran)")
    return "\n".join(lines)


def _tree(t, depth: int) -> list:
    pad = "  " * depth
    if isinstance(t, Const):
        return [f"{pad}const {t.value!r} ({t.dtype})"]
    if t._data is not None:
        return [f"{pad}tensor {t.shape} {t.dtype}"]
    label = t._op if t._op not in ("move", "host") else t._attrs[0]
    if t._op == "reduce":
        label = f"{t._attrs[0]} axes={t._attrs[1]} keepdims={t._attrs[2]}" + (
            f" / {t._attrs[3]}" if t._attrs[3] else "")
    out = [f"{pad}{label} -> {t.shape} {t.dtype}"]
    for a in t._args:
        out += _tree(a, depth + 1)
    return out
