"""The Triton backend's own contract: device memory, loading generated source (more lands with the backend).

Runs on CUDA when torch sees a device, else under Triton's interpreter (TRITON_INTERPRET=1, set here
before any kernel is defined)."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

from eidos.errors import BackendError, UnsupportedError  # noqa: E402
from eidos.isa import Address, Type  # noqa: E402
from eidos.isa.backends.triton import source  # noqa: E402
from eidos.isa.backends.triton.device import DeviceMemory, default_device  # noqa: E402
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
