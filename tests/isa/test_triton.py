"""The Triton backend's own contract: device memory, loading generated source (more lands with the backend).

Runs on CUDA when torch sees a device, else under Triton's interpreter (TRITON_INTERPRET=1, set here
before any kernel is defined)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.isa.conftest import use_triton_interpreter_without_cuda  # noqa: E402

use_triton_interpreter_without_cuda()  # before triton is imported
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from eidos.errors import BackendError, IsaError, UnsupportedError  # noqa: E402
from eidos.isa import Address, Type  # noqa: E402
from eidos.isa.backends.triton import compile as source  # noqa: E402
from eidos.isa.backends.triton.device_memory import DeviceMemory, default_device  # noqa: E402
from eidos.isa.memory import Memory  # noqa: E402

DEVICE = default_device()


@pytest.fixture
def mem():
    return DeviceMemory()


def test_device_is_cuda_or_the_interpreters_cpu(mem):
    assert mem.device == DEVICE
    assert DEVICE.type == ("cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu")
    assert mem.class_memory.numel() == 1_179_648 and mem.class_memory.device == DEVICE
    assert mem.accumulators.shape == (96,) and mem.phases.shape == (96,)


def test_buffers_live_on_the_device_and_copy_with_offsets(mem):
    h = mem.allocate_buffer(64)
    t = mem.tensor(h)
    assert t.dtype == torch.uint8 and t.device == DEVICE and t.numel() == 64 and int(t.sum()) == 0
    data = np.arange(8, dtype=np.float32)
    mem.copy_in(t, 16, data, "copy_to_buffer")
    out = np.zeros(8, np.float32)
    mem.copy_out(t, 16, out, "copy_from_buffer")
    assert out.tolist() == data.tolist()
    v = mem.view(Address.buffer(h, 16), Type.F32, 8)
    assert v.dtype == torch.float32 and v.cpu().tolist() == data.tolist()
    v.mul_(2)  # a view shares the memory
    mem.copy_out(t, 16, out, "copy_from_buffer")
    assert out.tolist() == (data * 2).tolist()


def test_views_of_every_space_and_type(mem):
    p = mem.allocate_pool(32)
    assert mem.view(Address.pool(p, 8), Type.U64, 3).dtype == torch.uint64
    c = mem.view(Address.cls(2, 4), Type.I32, 4)
    c.fill_(-3)
    raw = mem.class_memory[2 * 12288 + 4:2 * 12288 + 20].cpu().numpy().view(np.int32)
    assert raw.tolist() == [-3] * 4
    for ty in (Type.F16, Type.BF16, Type.F64, Type.I8, Type.U16, Type.U32):
        assert mem.view(Address.pool(p), ty, 2).element_size() == ty.size_bytes


def test_view_errors_are_the_references(mem):
    ref = Memory()
    h, hr = mem.allocate_buffer(16), ref.allocate_buffer(16)
    assert h == hr
    with pytest.raises(BackendError, match=r"instruction 3 \(ParallelMap\): src_array needs bytes 0..20 but its memory has 16"):
        mem.view(Address.buffer(h), Type.F32, 5, what="instruction 3 (ParallelMap)", name="src_array")
    mem.free_buffer(h)
    with pytest.raises(BackendError, match="was freed") as e:
        mem.view(Address.buffer(h), Type.F32, 1)
    ref.free_buffer(hr)
    with pytest.raises(BackendError) as e_ref:
        ref.buffer(hr, "view")
    assert str(e.value) == str(e_ref.value)
    with pytest.raises(BackendError, match="no buffer with handle 77"):
        mem.view(Address.buffer(77), Type.F32, 1)
    with pytest.raises(UnsupportedError, match="not a multiple of F32"):
        mem.view(Address.pool(mem.allocate_pool(16), 2), Type.F32, 1)
    with pytest.raises(UnsupportedError, match="I128"):
        mem.view(Address.pool(mem.allocate_pool(32)), Type.I128, 1)
    with pytest.raises(BackendError, match="register"):
        mem.view(Address.register(3), Type.F32, 1)


def test_adopt_aliases_without_copy(mem):
    x = torch.arange(6, dtype=torch.float32, device=DEVICE)
    h = mem.adopt(x)
    assert mem.tensor(h).data_ptr() == x.data_ptr() and mem.tensor(h).numel() == 24
    mem.view(Address.buffer(h), Type.F32, 6).add_(1)
    assert x.cpu().tolist() == [1, 2, 3, 4, 5, 6]
    with pytest.raises(BackendError, match="not contiguous"):
        mem.adopt(torch.zeros(4, 4, device=DEVICE).t())
    with pytest.raises(BackendError, match="expected a torch.Tensor"):
        mem.adopt(np.zeros(3))


def test_copies_from_and_to_tensors(mem):
    h = mem.allocate_buffer(16)
    mem.copy_in(mem.tensor(h), 0, torch.tensor([1.5, 2.5], dtype=torch.float64), "copy_to_buffer")
    out = torch.zeros(2, dtype=torch.float64)
    mem.copy_out(mem.tensor(h), 0, out, "copy_from_buffer")
    assert out.tolist() == [1.5, 2.5]


KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + i, tl.load(x + i, mask=i < n) * 3, mask=i < n)
'''


def test_source_loads_once_and_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("EIDOS_CACHE_DIR", str(tmp_path))
    src = KERNEL + f"# {tmp_path.name}\n"  # a source new to this process
    fn = source.load(src, "scale")
    assert source.load(src, "scale") is fn
    assert source.path_of(src).read_text() == src and str(tmp_path) in str(source.path_of(src))
    x = torch.arange(10, dtype=torch.float32, device=DEVICE)
    y = torch.empty_like(x)
    fn[(1,)](x, y, 10, BLOCK=16)
    assert y.cpu().tolist() == [3.0 * i for i in range(10)]
    with pytest.raises(BackendError, match="defines no 'nope'"):
        source.load(src, "nope")
    with pytest.raises(BackendError, match="does not load"):
        source.load("this is not python(\n", "k")


# ---- the backend ---------------------------------------------------------------------------------

import math  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from eidos import isa  # noqa: E402
from eidos.isa import BinaryMapOperation, LaunchConfig, MapOperation, ReduceOperation, Register  # noqa: E402
from eidos.isa.backends.reference import ReferenceBackend  # noqa: E402
from eidos.isa.backends.triton import TritonBackend, arrays  # noqa: E402
from tests.isa import strategies as GS  # noqa: E402
from tests.isa.harness import assert_values, decode, encode  # noqa: E402
from tests.isa.values import FLOATS, SMALL_INTS, values  # noqa: E402

BOTH = ("triton", "reference")


def _backends():
    return TritonBackend(), ReferenceBackend()


def _load(be, ty, *arrays_):
    hs = []
    for a in arrays_:
        h = be.allocate_buffer(max(1, ty.size_bytes * len(a)))
        be.copy_to_buffer(h, encode(a, ty))
        hs.append(h)
    return hs


def _read(be, h, ty):
    data = bytearray(be.buffer_size(h))
    be.copy_from_buffer(h, data)
    return decode(bytes(data[:len(data) - len(data) % ty.size_bytes]), ty)


def _same_on_both(program_of, ty, inputs, out_count, max_ulps=0):
    """Run program_of(handles) on both backends over the same inputs; compare every buffer."""
    got = []
    for be in _backends():
        hs = _load(be, ty, *inputs)
        out = be.allocate_buffer(ty.size_bytes * out_count)
        be.execute_program(program_of(hs, out), LaunchConfig.linear(3))
        got.append([_read(be, h, ty) for h in hs + [out]])
    for g, w in zip(*got):
        assert_values(g, w, ty, max_ulps=max_ulps)


@pytest.mark.parametrize("ty", FLOATS + SMALL_INTS, ids=str)
@pytest.mark.parametrize("op", list(ReduceOperation), ids=lambda o: o.value)
def test_reductions_equal_the_reference(op, ty):
    x = [v for v in values(ty, 40) if not (ty.is_float and op is ReduceOperation.Product and
                                           (math.isinf(v) or abs(v) > 8))]
    if ty.is_float and op is ReduceOperation.Sum:  # see test_sums_are_compensated_not_exact
        x = [v for v in x if math.isnan(v) or math.isinf(v) or abs(v) < 1e6]
    x = x + x[::-1] + [x[0]] * 3  # ties (0.0 and -0.0 among them) and a second pass

    def program(hs, out):
        return isa.ProgramBuilder().add(
            isa.ParallelReduce(Register(0), Address.buffer(hs[0]), len(x), op, ty),
            isa.STG(Address.buffer(out), Register(0), ty)).build()
    _same_on_both(program, ty, [x], 1, max_ulps=2 if op is ReduceOperation.Product and ty.is_float else 0)


@pytest.mark.parametrize("ty", [Type.F32, Type.F64, Type.I32, Type.U64], ids=str)
def test_reductions_over_many_programs_combine_partials(ty):
    n = 3 * arrays.REDUCE_BLOCK + 17  # several programs, several tiles each, then `finish` combines them
    x = (values(ty, 64) * (n // 64 + 1))[:n]
    x = [v for v in x if not (ty.is_float and (math.isinf(v) or math.isnan(v) or abs(v) > 1e6))]
    for op in (ReduceOperation.Sum, ReduceOperation.Min, ReduceOperation.Max):
        def program(hs, out, op=op):
            return isa.ProgramBuilder().add(
                isa.ParallelReduce(Register(0), Address.buffer(hs[0]), len(x), op, ty),
                isa.STG(Address.buffer(out), Register(0), ty)).build()
        _same_on_both(program, ty, [x], 1)


def test_sums_are_compensated_not_exact():
    """Float sums are double-double (about 106 bits), so they round correctly unless terms some 2^100
    apart cancel; the reference's math.fsum is exact. The documented limit, shown."""
    x = [1e300, 1.0, -1e300, 2.0 ** -60]
    def program(hs, out):
        return isa.ProgramBuilder().add(
            isa.ParallelReduce(Register(0), Address.buffer(hs[0]), 4, ReduceOperation.Sum, Type.F64),
            isa.STG(Address.buffer(out), Register(0), Type.F64)).build()
    got = []
    for be in _backends():
        (h,) = _load(be, Type.F64, x)
        out = be.allocate_buffer(8)
        be.execute_program(program([h], out), LaunchConfig.linear(1))
        got.append(_read(be, out, Type.F64)[0])
    assert got[1] == 1.0 + 2.0 ** -60 or got[1] == 1.0  # the reference: exact, then rounded
    assert abs(got[0] - got[1]) <= 1.0  # compensated: the 1.0 survives the cancellation


def test_map_then_reduce_is_one_kernel_and_one_pass():
    ty, n = Type.F32, 300
    x = [float(i % 17) - 8.5 for i in range(n)]
    y = [float(i % 5) * 0.25 for i in range(n)]

    def program(hs, out):
        a, b, t = Address.buffer(hs[0]), Address.buffer(hs[1]), Address.buffer(hs[2])
        return isa.ProgramBuilder().add(
            isa.ParallelMapBinary(t, a, b, n, BinaryMapOperation.Mul, ty),
            isa.ParallelMap(t, t, n, MapOperation.Exp, ty),
            isa.ParallelMapBinary(t, t, b, n, BinaryMapOperation.Max, ty),
            isa.ParallelReduce(Register(0), t, n, ReduceOperation.Sum, ty),
            isa.STG(Address.buffer(out), Register(0), ty)).build().optimize()
    _same_on_both(program, ty, [x, y, [0.0] * n], 1, max_ulps=4)
    be = TritonBackend()
    hs = _load(be, ty, x, y, [0.0] * n)
    p = program(hs, be.allocate_buffer(4))
    assert [type(i).__name__ for i in p.instructions] == ["FusedMap", "ParallelReduce", "STG"]
    plan = be.plan(p)
    kernels = [s for s in plan.steps if isinstance(s, type(plan.steps[0])) and hasattr(s, "group")]
    assert len(kernels) == 1 and [i.name for _, i in kernels[0].group] == ["FusedMap", "ParallelReduce"]
    text = be.explain(p)
    assert "fused with the reduction after it" in text and text.count("def kernel(") == 1
    assert "def finish(" in text and "tl.reduce((hi, lo), 0, _dd)" in text


@pytest.mark.parametrize("ty", [Type.F16, Type.BF16, Type.F64, Type.I8, Type.U32], ids=str)
def test_many_programs_and_unaligned_offsets(ty):
    n = 2 * arrays.map_block(ty) + 5
    a = (values(ty, 64) * (n // 64 + 1))[:n]
    b = (values(ty, 64, seed=3) * (n // 64 + 1))[:n]

    def program(hs, out):  # the output starts 1 byte in: an aligned copy, written back
        return isa.ProgramBuilder().add(
            isa.ParallelMapBinary(Address.buffer(out, 1), Address.buffer(hs[0]), Address.buffer(hs[1]), n,
                                  BinaryMapOperation.Max, ty)).build()
    # read the output where it was written (from byte 1): a NaN matches any NaN (docs/isa.md), and a GPU
    # computing F16/BF16 in float32 makes every NaN the canonical 0x7fffffff, so elements decoded across
    # the 1-byte shift would compare NaN payload bytes as parts of other numbers
    got = []
    for be in _backends():
        hs = _load(be, ty, a, b)
        out = be.allocate_buffer(ty.size_bytes * (n + 1))
        be.execute_program(program(hs, out), LaunchConfig.linear(3))
        data = bytearray(be.buffer_size(out))
        be.copy_from_buffer(out, data)
        got.append((data[0], data[1 + n * ty.size_bytes:], decode(bytes(data[1:1 + n * ty.size_bytes]), ty),
                    [_read(be, h, ty) for h in hs]))
    (g0, gtail, g, gin), (w0, wtail, w, win) = got
    assert (g0, bytes(gtail)) == (w0, bytes(wtail)) == (0, bytes(ty.size_bytes - 1))  # untouched bytes stay 0
    assert_values(g, w, ty)
    for x, y in zip(gin, win):
        assert_values(x, y, ty)


def test_launch_is_cached_per_program_and_per_key():
    be = TritonBackend()
    (h,) = _load(be, Type.F32, [1.0, -2.0, 3.0])
    p = isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(h), Address.buffer(h), 3, MapOperation.Abs)).build()
    be.execute_program(p, LaunchConfig.linear(1))
    plan = be.plan(p)
    assert plan.fast is not None and be.plan(p) is plan
    misses = be.cache.misses
    twin = isa.from_json(p.to_json())  # another object, the same Blake3 key
    assert twin is not p and be.plan(twin) is plan and be.cache.misses == misses and be.cache.hits >= 1
    kernel = plan.fast[0].kernel
    be.execute_program(twin, LaunchConfig.linear(1))
    assert plan.fast[0].kernel is kernel and kernel.memory is be.memory
    assert _read(be, h, Type.F32) == [1.0, 2.0, 3.0]
    be.allocate_buffer(4)  # an allocation re-checks the addresses before the next launch
    be.execute_program(p, LaunchConfig.linear(1))
    assert kernel.generation == be.memory.generation


def test_explain_shows_routes_and_source():
    be = TritonBackend()
    a, b = be.allocate_buffer(64), be.allocate_buffer(64)
    p = isa.ProgramBuilder().add(
        isa.ParallelMapBinary(Address.buffer(a), Address.buffer(a), Address.buffer(b), 16, BinaryMapOperation.Add),
        isa.MOV_IMM(Register(1), 2.0, Type.F32),
        isa.STG(Address.buffer(b), Register(1), Type.F32)).build()
    text = be.explain(p)
    assert "runs: array" in text and "0: ParallelMapBinary -> arrays.py" in text
    assert "1: MOV_IMM -> uniform register code" in text and "@triton.jit" in text and "tl.load(" in text


def test_adopt_runs_kernels_on_the_callers_tensor_without_copy():
    be = TritonBackend()
    x = torch.tensor([1.0, -4.0, 9.0], dtype=torch.float32, device=be.device)
    ptr = x.data_ptr()
    h = be.adopt(x)
    p = isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(h), Address.buffer(h), 3, MapOperation.Relu)).build()
    be.execute_program(p, LaunchConfig.linear(1))
    assert x.data_ptr() == ptr and x.cpu().tolist() == [1.0, 0.0, 9.0]
    assert be.tensor(h).data_ptr() == ptr


def test_errors_name_what_is_wrong():
    be, ref = _backends()
    for b in (be, ref):
        b.allocate_buffer(16)
    p = isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(1, 4), Address.buffer(1), 2, MapOperation.Neg)).build()
    msgs = []
    for b in (be, ref):
        with pytest.raises(BackendError) as e:
            b.execute_program(p, LaunchConfig.linear(1))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "partially overlaps" in msgs[0]
    wide = isa.ParallelMap(Address.buffer(1), Address.buffer(1), 1, MapOperation.Neg, Type.I128)
    with pytest.raises(IsaError, match="takes types up to 64 bits, got I128"):  # validation, before any backend
        isa.ProgramBuilder().add(wide).build()
    with pytest.raises(UnsupportedError, match=r"instruction 2 \(ParallelMap\): type I128 has no Triton form"):
        arrays.check_type(wide, 2)
    allred = isa.ProgramBuilder().add(isa.AllReduce(Address.buffer(1), 4, ReduceOperation.Sum)).build()
    with pytest.raises(UnsupportedError, match="AllReduce.*one device"):
        be.execute_program(allred, LaunchConfig.linear(1))
    be.free_buffer(1)
    with pytest.raises(BackendError, match="buffer 1 was freed"):
        be.execute_program(p, LaunchConfig.linear(1))


def test_pool_instructions_allocate_on_the_device():
    be = TritonBackend()
    p = isa.ProgramBuilder().add(isa.PoolAlloc(7, 32), isa.MOV_IMM(Register(0), 5, Type.I32),
                                 isa.PoolStore(7, 4, Register(0), Type.I32)).build()
    be.execute_program(p, LaunchConfig.linear(8))
    assert be.tensor(7).device == be.device and be.pool_size(7) == 32
    out = bytearray(4)
    be.copy_from_pool(7, 4, out)
    assert int.from_bytes(out, "little") == 5
    be.execute_program(isa.ProgramBuilder().add(isa.PoolFree(7)).build(), LaunchConfig.linear(1))
    with pytest.raises(BackendError, match="pool 7 was freed"):
        be.pool_size(7)


MAPS = [op for op in MapOperation]
BINARY = [op for op in BinaryMapOperation]


@st.composite
def chains(draw):
    """A chain of maps over three buffers (any operation, float types), optimized or not, maybe reduced."""
    ty = draw(st.sampled_from([Type.F32, Type.F64, Type.F16]))
    n = draw(st.integers(1, 40))
    addr = st.sampled_from([Address.buffer(h) for h in (1, 2, 3)])
    b = isa.ProgramBuilder()
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            b.add(isa.ParallelMap(draw(addr), draw(addr), n, draw(st.sampled_from(MAPS)), ty))
        else:
            b.add(isa.ParallelMapBinary(draw(addr), draw(addr), draw(addr), n, draw(st.sampled_from(BINARY)), ty))
    if draw(st.booleans()):
        op = draw(st.sampled_from([ReduceOperation.Sum, ReduceOperation.Min, ReduceOperation.Max]))
        b.add(isa.ParallelReduce(Register(0), draw(addr), n, op, ty), isa.STG(Address.buffer(4), Register(0), ty))
    data = [draw(st.lists(st.floats(-3, 3, width=16), min_size=n, max_size=n)) for _ in range(3)]
    program = b.build()
    return (program.optimize() if draw(st.booleans()) else program), ty, n, data


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=chains())
def test_generated_chains_with_every_operation_match_the_reference(g):
    program, ty, n, data = g
    got = []
    for be in _backends():
        hs = _load(be, ty, *data) + [be.allocate_buffer(ty.size_bytes)]
        be.execute_program(program, LaunchConfig.linear(2))
        got.append([_read(be, h, ty) for h in hs])
    for g_, w in zip(*got):
        # transcendentals and a sum after them may differ by a few ulps (float64 libm vs NumPy); a chain
        # feeds one step's rounding into the next, so compare loosely but everywhere, NaNs included
        assert all(math.isnan(a) == math.isnan(b) and (math.isnan(a) or a == b or
                                                       abs(a - b) <= 1e-3 * max(1.0, abs(b)) or
                                                       (math.isinf(a) and a == b)) for a, b in zip(g_, w)), (g_, w)


def test_gpu_bench_logic_runs_small_here(capsys):
    """bench/gpu_isa.py, which the lead runs on the GPU, with tiny sizes: its cases run and its answers
    equal torch's (the script returns 1 when they differ)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "gpu_isa.py"
    spec = importlib.util.spec_from_file_location("gpu_isa_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--smoke", "--log2n", "10"]) == 0
    out = capsys.readouterr().out
    assert "add: eidos" in out and "map+sum: eidos" in out and "bare Triton kernel launch" in out
    assert "x*y+sum: eidos" in out
    assert "answers equal torch's: {'add': True, 'fused': True, 'map+sum': True, 'x*y+sum': True}" in out


@pytest.mark.parametrize("ty", [Type.F64, Type.BF16, Type.U64, Type.I8], ids=str)
def test_scalar_operands_are_read_once_exactly(ty):
    """A Register as a map operand: its value (rounded or wrapped to ty) for every element."""
    x = values(ty, 30)
    imm = 0.1 if ty.is_float else ty.max_value

    def program(hs, out):
        r = Register(3)
        return isa.ProgramBuilder().add(
            isa.MOV_IMM(r, imm, ty),
            isa.ParallelMapBinary(Address.buffer(hs[0]), Address.buffer(hs[0]), r, len(x), BinaryMapOperation.Sub, ty),
            isa.ParallelMapBinary(Address.buffer(hs[0]), r, Address.buffer(hs[0]), len(x), BinaryMapOperation.Max, ty),
        ).build().optimize()
    _same_on_both(program, ty, [x], 1)


GPU_BUILD = r'''
import os, sys
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from eidos.isa import Type, MapOperation as M, BinaryMapOperation as B, ReduceOperation as R
from eidos.isa.backends.triton import arrays, compile as S

def build(fn, sig, const):
    return triton.compile(ASTSource(fn, sig, constexprs=const), target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=8, enable_fp_fusion=False))

# a float chain with a scalar operand and every kind of step (libdevice, div_rn, sqrt_rn, min/max)
steps = ((0, B.Mul, 1, 2), (0, M.Exp, 0, None), (3, B.Pow, 0, 1), (3, B.Atan2, 3, 0), (0, B.Min, 3, 0),
         (0, M.Tanh, 0, None), (0, M.Sigmoid, 0, None), (0, B.Div, 0, 1), (0, M.Sqrt, 0, None), (0, M.Neg, 0, None))
src = arrays.chain_source(Type.F32, steps, 4, (1, 2), (0, 3), None, False, {2: 0})
k = build(S.load(src, "kernel"), {"x0": "*fp32", "x1": "*fp32", "x3": "*fp32", "sc": "*fp32", "n": "i32",
                                  "BLOCK": "constexpr"}, {"BLOCK": 4096})
ptx = k.asm["ptx"]
assert "div.rn.f32" in ptx and "div.full.f32" not in ptx and "sqrt.rn.f32" in ptx, "inexact float32 division/sqrt"
# integer division with its guards
src = arrays.chain_source(Type.I64, ((0, B.Div, 1, 2),), 3, (1, 2), (0,), None, False)
build(S.load(src, "kernel"), {"x0": "*i64", "x1": "*i64", "x2": "*i64", "n": "i32", "BLOCK": "constexpr"},
      {"BLOCK": 2048})
# a map fused into a double-double sum, both reduction kernels
src = arrays.chain_source(Type.BF16, ((0, B.Mul, 1, 2),), 3, (1, 2), (0,), arrays.Reduction(R.Sum, 0), False)
sig = {"x0": "*bf16", "x1": "*bf16", "x2": "*bf16", "n": "i32", "p": "i32", "iters": "i32", "pa": "*fp64",
       "pb": "*fp64", "out": "*bf16", "BLOCK": "constexpr", "FINAL": "constexpr"}
build(S.load(src, "kernel"), sig, {"BLOCK": 2048, "FINAL": False})
build(S.load(src, "finish"), {"pa": "*fp64", "pb": "*fp64", "out": "*bf16", "p": "i32", "iters": "i32",
                              "BLOCK": "constexpr"}, {"BLOCK": 1024})
print("built")
'''


def test_generated_kernels_compile_for_a_real_gpu(tmp_path):
    """The interpreter never checks that generated code is valid GPU Triton: compile representative
    kernels through Triton's real pipeline (PTX and cubin for sm_90) without a GPU, in a process where
    TRITON_INTERPRET is unset, and check float32 division and sqrt are the correctly rounded ones."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["EIDOS_CACHE_DIR"] = str(tmp_path)
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    r = subprocess.run([sys.executable, "-c", GPU_BUILD], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "built" in r.stdout, r.stderr[-3000:]


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gp=GS.programs(transcendentals=False))
def test_programs_with_wide_integers_are_unsupported_naming_the_type(gp):
    """The shared generated-program tests leave I128 out for this backend; here is why: it says so."""
    with pytest.raises(UnsupportedError, match="I128"):
        GS.run(TritonBackend(), gp)


def test_map_into_a_pool_freed_after_its_sum_stores_nothing():
    """The tensor layer's map+sum form: a FusedMap into a pool, its Sum, the pool's PoolFree: one kernel
    that keeps the map's values in registers and stores nothing (one read of x and y, no write)."""
    ty, n = Type.F32, 300
    x = [float(i % 17) * 0.125 - 1.0 for i in range(n)]
    y = [float(i % 5) * 0.25 for i in range(n)]
    pool = 7

    def program(hs, out, free=True):
        t = Address.pool(pool)
        body = [isa.PoolAlloc(pool, 4 * n),
                isa.FusedMap(n, (isa.MapStep(t, BinaryMapOperation.Mul, Address.buffer(hs[0]), Address.buffer(hs[1])),
                                 isa.MapStep(t, MapOperation.Exp, t)), ty),
                isa.ParallelReduce(Register(0), t, n, ReduceOperation.Sum, ty)]
        return isa.ProgramBuilder().add(*body, *([isa.PoolFree(pool)] if free else []),
                                        isa.STG(Address.buffer(out), Register(0), ty)).build()
    _same_on_both(program, ty, [x, y], 1, max_ulps=4)
    be = TritonBackend()
    hs = _load(be, ty, x, y)
    dead, kept = (be.explain(program(hs, be.allocate_buffer(4), free)) for free in (True, False))
    assert "its pool is freed next: nothing stored" in dead and "tl.store(x" not in dead.split("def kernel(")[1]
    assert "nothing stored" not in kept and "tl.store(x0 + offs" in kept.split("def kernel(")[1]
    assert "not zeroed" in dead and "not zeroed" not in kept


def _sum_through_pool(be, hs, out, n, ty, pool=7, first=None):
    """PoolAlloc, FusedMap into the pool (first step `first`, else x * y), its Sum, PoolFree, STG."""
    t = Address.pool(pool)
    step = first or isa.MapStep(t, BinaryMapOperation.Mul, Address.buffer(hs[0]), Address.buffer(hs[1]))
    return isa.ProgramBuilder().add(
        isa.PoolAlloc(pool, ty.size_bytes * n), isa.FusedMap(n, (step, isa.MapStep(t, MapOperation.Abs, t)), ty),
        isa.ParallelReduce(Register(0), t, n, ReduceOperation.Sum, ty), isa.PoolFree(pool),
        isa.STG(Address.buffer(out), Register(0), ty)).build()


def test_a_pool_read_before_it_is_written_stays_zeroed():
    """Skipping the memset is right only when nothing reads the pool first: a chain whose first step
    reads the fresh pool (0 + x) must see zeros, so that allocation keeps its memset."""
    ty, n = Type.F32, 100
    x = [float(i) - 50.0 for i in range(n)]
    t = Address.pool(7)

    def program(hs, out):
        return _sum_through_pool(None, hs, out, n, ty, first=isa.MapStep(t, BinaryMapOperation.Add, t,
                                                                          Address.buffer(hs[0])))
    _same_on_both(program, ty, [x], 1)
    be = TritonBackend()
    hs = _load(be, ty, x)
    text = be.explain(program(hs, be.allocate_buffer(4)))
    assert "its pool is freed next: nothing stored" in text and "not zeroed" not in text


def test_a_kernel_keeps_its_binding_while_its_tensors_stay(monkeypatch):
    """A dead chain's pool is no kernel argument, so making it anew each run (and any allocation or free
    elsewhere) rebinds nothing: a cached map+sum launch skips the reference's checks. A freed operand
    still gets the reference's message."""
    ty, n = Type.F32, 64
    be = TritonBackend()
    hs = _load(be, ty, [1.5] * n, [-2.0] * n)
    out = be.allocate_buffer(4)
    p = _sum_through_pool(be, hs, out, n, ty)
    be.execute_program(p, LaunchConfig.linear(1))
    checked = []
    monkeypatch.setattr(arrays, "check", lambda ins, i, memory: checked.append(i))
    for _ in range(3):
        be.execute_program(p, LaunchConfig.linear(1))
    be.free_buffer(be.allocate_buffer(8))
    be.execute_program(p, LaunchConfig.linear(1))
    assert checked == [] and _read(be, out, ty) == [3.0 * n]
    monkeypatch.undo()
    be.free_buffer(hs[1])
    with pytest.raises(BackendError, match="was freed"):
        be.execute_program(p, LaunchConfig.linear(1))


def test_an_unaligned_input_is_read_afresh_at_every_launch():
    """An operand 1 byte into its buffer runs through an aligned copy; that copy is refilled before each
    launch, so new data written between two runs of a cached program is what the second run reads."""
    ty, n = Type.F32, 40
    be = TritonBackend()
    src = be.allocate_buffer(4 * n + 1)
    dst = be.allocate_buffer(4 * n)
    p = isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(dst), Address.buffer(src, 1), n, MapOperation.Neg,
                                                 ty)).build()
    for k in (1.0, 2.0):
        be.copy_to_buffer(src, b"\0" + encode([k] * n, ty))
        be.execute_program(p, LaunchConfig.linear(1))
        assert _read(be, dst, ty) == [-k] * n


def test_a_stored_sum_never_waits_for_the_gpu(monkeypatch):
    """map+sum then STG of the result: the sum stays on the device and the STG is a device copy, so
    the host never fetches it (register_value is never called) and the stored bytes are the sum's."""
    ty, n = Type.F32, 64
    be = TritonBackend()
    hs = _load(be, ty, [0.5] * n, [3.0] * n)
    out = be.allocate_buffer(4)
    p = _sum_through_pool(be, hs, out, n, ty)

    def fetched(*_):
        raise AssertionError("the reduction's result was fetched to the host")
    monkeypatch.setattr(arrays, "register_value", fetched)
    be.execute_program(p, LaunchConfig.linear(1))
    monkeypatch.undo()
    assert _read(be, out, ty) == [1.5 * n]


@pytest.mark.parametrize("after", ["arithmetic", "overwritten", "scalar operand"])
def test_a_sum_read_on_the_host_is_fetched_when_read(after):
    """A reduction's result that register code reads (ADD), overwrites (MOV_IMM) or passes as a map's
    scalar operand gives the reference's bytes."""
    ty, n = Type.F32, 50
    x = [float(i % 7) - 2.5 for i in range(n)]
    r0, r1 = Register(0), Register(1)

    def program(hs, out):
        a = Address.buffer(hs[0])
        tail = {"arithmetic": [isa.ADD(r1, r0, r0, ty), isa.STG(Address.buffer(out), r1, ty)],
                "overwritten": [isa.MOV_IMM(r0, 7.0, ty), isa.STG(Address.buffer(out), r0, ty)],
                "scalar operand": [isa.ParallelMapBinary(a, a, r0, n, BinaryMapOperation.Mul, ty),
                                   isa.STG(Address.buffer(out), r0, ty)]}[after]
        return isa.ProgramBuilder().add(isa.ParallelReduce(r0, a, n, ReduceOperation.Sum, ty), *tail).build()
    _same_on_both(program, ty, [x], 1)


def test_a_cached_launch_calls_the_compiled_kernel_directly():
    """After the first launch of a binding, its launches skip Triton's per-call specialization and call
    the compiled kernel's launcher (on a GPU; the interpreter has no compiled kernel), and still read
    the data as it is at each launch."""
    ty, n = Type.F32, 100
    be = TritonBackend()
    (h,) = _load(be, ty, [1.0] * n)
    out = be.allocate_buffer(4 * n)
    p = isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(out), Address.buffer(h), n, MapOperation.Neg, ty)).build()
    for k in (1.0, 2.0, 3.0):
        be.copy_to_buffer(h, encode([k] * n, ty))
        be.execute_program(p, LaunchConfig.linear(1))
        assert _read(be, out, ty) == [-k] * n
    (prepared,) = be.plan(p).fast[0].kernel.launches
    assert (prepared.direct is not None) == (DEVICE.type == "cuda")
