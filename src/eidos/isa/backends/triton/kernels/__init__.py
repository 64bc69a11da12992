"""Triton kernels for the Atlas ISA's array-level extensions, one module per family.

Each module holds the @triton.jit kernels and a host function per instruction family taking
typed torch tensors (DeviceMemory.view) and launching them. Kernels compute in float32 for F16,
BF16 and F32 inputs (float64 for F64) and round once on store, so results stay within
docs/isa.md's bound of the reference; matrix products use tensor cores for F16/BF16 and IEEE
float32 (never TF32) for F32.

Under TRITON_INTERPRET=1 (no GPU) the same kernels run in Triton's interpreter: autotuned
kernels then try one small configuration instead of benchmarking the Hopper ones.
"""

from __future__ import annotations

import functools
import os

import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"


def _interpreter_index_fix() -> None:
    """Triton <= 3.9's interpreter turns a scalar into a Python int with int(array of shape (1,)),
    which NumPy >= 2.4 refuses (triton-lang/triton#9171, fixed upstream by #9172): every loop with
    a run-time bound fails. Until a fixed Triton is released, re-register __index__ the fixed way."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "eidos_fixed", False):
        return

    def patch(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patch.eidos_fixed = True
    interpreter._patch_lang_tensor = patch


if INTERPRET:
    _interpreter_index_fix()


# Triton's interpreter multiplies bfloat16 blocks as their uint16 bit patterns; there the operands
# are widened to float32 first (exact: float32 holds every bfloat16 and their products' sums as
# the GPU accumulates them). Compiled kernels multiply bfloat16 on the tensor cores.
_WIDEN_BF16 = tl.constexpr(INTERPRET)


@triton.jit
def dot(a, b, acc, PRECISION: tl.constexpr, ACC: tl.constexpr):
    """acc + a @ b accumulated in ACC (tl.dot, with the interpreter's bfloat16 work-around)."""
    if _WIDEN_BF16:
        if a.dtype == tl.bfloat16:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
    return tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)


@triton.jit
def sqrt(x):
    """Correctly rounded square root (tl.sqrt may approximate in float32; float64 is exact)."""
    if x.dtype == tl.float64:
        return tl.sqrt(x)
    else:
        return tl.sqrt_rn(x)


@triton.jit
def div(x, y):
    """Correctly rounded division (the / operator may approximate in float32)."""
    if x.dtype == tl.float64:
        return x / y
    else:
        return tl.div_rn(x, y)


@triton.jit
def _bf16_rne(x):
    """float32 -> bfloat16 rounded to nearest, ties to even, by integer arithmetic on the bits."""
    bits = x.to(tl.uint32, bitcast=True)
    r = bits + 0x7FFF + ((bits >> 16) & 1)
    r = tl.where(x != x, bits | 0x400000, r)  # NaN stays a (quiet) NaN
    return (r >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)


@triton.jit
def narrow(x, dtype: tl.constexpr):
    """A computed value rounded once to the element type as the reference rounds: BF16 through
    float32, others directly. (The interpreter's own float32 -> bfloat16 cast truncates; the
    GPU's cvt.rn is exact, so the bit arithmetic runs only in the interpreter.)"""
    if dtype == x.dtype:
        return x
    elif dtype == tl.bfloat16:
        if _WIDEN_BF16:
            return _bf16_rne(x.to(tl.float32))
        else:
            return x.to(tl.float32).to(tl.bfloat16)
    else:
        return x.to(dtype)


def configs(hopper: list, interpret: list) -> list:
    """The autotuner's candidate configs: the Hopper set on a GPU, a small one in the interpreter."""
    return interpret if INTERPRET else hopper


_SCALARS: dict = {}


def scalars(device, *values: float):
    """Float64 constants on the device, made once each: Triton passes Python floats as float32,
    which would round an F64 instruction's alpha or eps."""
    import torch

    key = (str(device), values)
    t = _SCALARS.get(key)
    if t is None:
        if len(_SCALARS) > 4096:
            _SCALARS.clear()
        t = _SCALARS[key] = torch.tensor(values, dtype=torch.float64, device=device)
    return t


def accumulator(dtype):
    """The type kernels compute in for a float element type: float64 for float64, else float32."""
    import torch

    return tl.float64 if dtype == torch.float64 else tl.float32


def precision(dtype) -> str:
    """tl.dot's input precision: IEEE for float32 (never TF32) and float64; for 16-bit and int8
    operands Triton's default, which takes the tensor cores (it applies only to float32 anyway)."""
    import torch

    return "ieee" if dtype in (torch.float32, torch.float64) else "tf32"


@functools.cache
def hopper(device) -> bool:
    """Whether a CUDA device is Hopper or newer (TMA, wgmma)."""
    import torch

    return torch.cuda.get_device_capability(device)[0] >= 9


@functools.cache
def processors(device) -> int:
    """Streaming multiprocessors of a CUDA device (persistent kernels launch one program each);
    a small number under the interpreter, so its tests walk several tiles per program."""
    if INTERPRET:
        return 2
    import torch

    return torch.cuda.get_device_properties(device).multi_processor_count


def chosen(routed: str, kernel: str | None) -> str:
    """The kernel to run: route()'s choice, or the caller's where it applies."""
    if kernel is None or kernel == routed:
        return routed
    if kernel == "pointer":
        return kernel
    from eidos.errors import UnsupportedError

    raise UnsupportedError(f"kernel {kernel!r} does not apply here (route() chose {routed!r}); "
                           "the choices are 'tma' (where route() allows it) and 'pointer'")


def cfg(num_warps: int = 4, num_stages: int = 3, **meta) -> triton.Config:
    return triton.Config(meta, num_warps=num_warps, num_stages=num_stages)


def pow2(n: int, least: int = 16) -> int:
    """The block size covering n: a power of two, at least `least` (tl.dot needs 16)."""
    return max(least, triton.next_power_of_2(max(int(n), 1)))
