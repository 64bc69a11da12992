"""The server's buffer pool: aligned blocks, coalescing frees, quotas, and errors that name the numbers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eidos.errors import BackendError, ResourceError
from eidos.remote.pool import Pool

MiB = 1 << 20


def test_blocks_are_aligned_writable_and_exact():
    pool = Pool(8 * MiB, pinned=False)
    small = pool.allocate(100, "a")
    large = pool.allocate(2 * MiB + 1, "a")
    assert small.offset % 64 == 0 and large.offset % 4096 == 0
    assert small.view.nbytes == 100 and not small.view.readonly
    assert large.view.nbytes == 2 * MiB + 1
    small.view[:] = bytes(range(100))
    assert bytes(small.view) == bytes(range(100))
    assert pool.used() == 128 + 2 * MiB + 4096 and pool.used("a") == pool.used() and pool.used("b") == 0


def test_array_is_a_view_without_copy():
    pool = Pool(MiB, pinned=False)
    block = pool.allocate(24, "a")
    arr = block.array(np.float64, (3,))
    arr[:] = [1.0, 2.0, 3.0]
    assert np.frombuffer(block.view, np.float64).tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(BackendError, match="24"):
        block.array(np.float64, (4,))


def test_zero_byte_blocks_are_valid():
    pool = Pool(MiB, pinned=False)
    blocks = [pool.allocate(0, "a") for _ in range(3)]
    assert all(b.view.nbytes == 0 for b in blocks) and pool.used() == 0
    for b in blocks:
        pool.free(b)
    with pytest.raises(BackendError, match="already freed"):
        pool.free(blocks[0])


def test_frees_coalesce_so_the_whole_pool_fits_again():
    pool = Pool(MiB, pinned=False)
    blocks = [pool.allocate(64 * 1024, "a") for _ in range(16)]
    with pytest.raises(ResourceError):
        pool.allocate(1, "a")
    for b in blocks[::2] + blocks[1::2]:      # every other one first: the holes merge only at the end
        pool.free(b)
    assert pool.used() == 0
    whole = pool.allocate(MiB, "a")
    assert whole.offset == 0


def test_resource_error_names_the_request_the_free_bytes_and_the_capacity():
    pool = Pool(MiB, pinned=False)
    pool.allocate(MiB // 2, "a")
    with pytest.raises(ResourceError) as info:
        pool.allocate(MiB, "b")
    text = str(info.value)
    assert str(MiB) in text and str(MiB // 2) in text and "capacity of 1048576" in text


def test_quota_limits_one_owner_only():
    pool = Pool(MiB, pinned=False)
    pool.set_quota("conn1", 4096)
    pool.allocate(4096, "conn1")
    with pytest.raises(ResourceError, match="quota is 4096"):
        pool.allocate(64, "conn1")
    pool.allocate(64 * 1024, "conn2")
    pool.set_quota("conn1", None)
    pool.allocate(64, "conn1")


def test_double_free_and_foreign_blocks_are_backend_errors():
    one, two = Pool(MiB, pinned=False), Pool(MiB, pinned=False)
    block = one.allocate(10, "a")
    with pytest.raises(BackendError, match="not from this pool"):
        two.free(block)
    one.free(block)
    with pytest.raises(BackendError, match="already freed"):
        one.free(block)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 300 * 1024)), max_size=60))
def test_random_allocations_never_overlap_and_all_memory_returns(ops):
    pool = Pool(2 * MiB, pinned=False)
    live = []
    for alloc, n in ops:
        if alloc or not live:
            try:
                live.append(pool.allocate(n, "x"))
            except ResourceError:
                continue
        else:
            pool.free(live.pop(n % len(live)))
        spans = sorted((b.offset, b.offset + b.size) for b in live if b.size)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        assert all(end <= pool.capacity for _, end in spans)
    for b in live:
        pool.free(b)
    assert pool.used() == 0 and pool.allocate(2 * MiB, "x").offset == 0


def test_an_unpinned_pool_does_not_import_torch():
    code = ("import sys, os; from eidos.remote.pool import Pool; p = Pool(1 << 20, pinned=False); "
            "p.allocate(10, 'a'); print('torch' in sys.modules); "
            "driver = os.path.exists('/dev/nvidiactl') or os.path.exists('/proc/driver/nvidia'); "
            "Pool(1 << 20); print(driver or 'torch' not in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # pinned=False never imports torch; the default looks for CUDA with torch only where an NVIDIA driver is
    assert out.stdout.split() == ["False", "True"]


def test_pinned_pool_uses_torch_pinned_memory():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("pinned host memory needs CUDA; this machine has none")
    pool = Pool(MiB, pinned=True)
    block = pool.allocate(4096, "a")
    block.view[:4] = b"abcd"
    assert block.tensor().is_pinned() and bytes(block.tensor()[:4].numpy()) == b"abcd"
