"""ProgramCache, Pool and stream()."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from eidos import isa
from eidos.errors import BackendError
from eidos.isa import Address, MapOperation, ProgramBuilder


def _prog(n=4, op=MapOperation.Relu):
    return ProgramBuilder().add(isa.ParallelMap(Address.buffer(1), Address.buffer(1), n, op)).build()


def test_cache_keys_are_blake3_of_program_target_options_and_versions():
    c = isa.ProgramCache(4)
    p, q = _prog(), _prog()
    assert c.key(p) == c.key(q) and len(c.key(p)) == 64
    assert c.key(p) != c.key(_prog(5)) and c.key(p) != c.key(p, "cpu") and c.key(p, "cpu") != c.key(p, "cpu", {"x": 1})
    assert p.digest() is p.digest()  # computed once per program object
    c.insert(p)
    assert c.get(q) is p and p in c and len(c) == 1


def test_cache_is_lru():
    c = isa.ProgramCache(2)
    a, b, d = _prog(1), _prog(2), _prog(3)
    c.insert(a, "A")
    c.insert(b, "B")
    assert c.get(a) == "A"
    c.insert(d, "D")
    assert c.get(b) is None and c.get(a) == "A" and c.get(d) == "D" and len(c) == 2
    with pytest.raises(BackendError, match="capacity must be a positive int"):
        isa.ProgramCache(0)


def test_get_or_compile_uses_the_disk_across_processes(tmp_path):
    calls = []

    def compile(program):
        calls.append(program)
        return f"compiled {len(program)}"

    c = isa.ProgramCache(4, directory=tmp_path)
    kw = dict(target="demo", dumps=str.encode, loads=bytes.decode)
    assert c.get_or_compile(_prog(), compile, **kw) == "compiled 1"
    assert c.get_or_compile(_prog(), compile, **kw) == "compiled 1" and len(calls) == 1
    code = ("from eidos import isa; from tests.isa.test_storage import _prog\n"
            f"c = isa.ProgramCache(4, directory={str(tmp_path)!r})\n"
            "def boom(p): raise SystemExit('compiled again')\n"
            "print(c.get_or_compile(_prog(), boom, target='demo', dumps=str.encode, loads=bytes.decode))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parents[2]))
    assert out.stdout.strip() == "compiled 1", out.stderr


def test_pool_is_a_circular_buffer():
    p = isa.Pool(8)
    assert p.capacity() == 8 and p.len() == 0 and len(p) == 0
    p.write(b"abc")
    assert p.read(0, 3) == b"abc" and p.len() == 3
    p.write(b"defgh")
    assert p.read(0, 8) == b"abcdefgh"
    p.write(b"XYZ")
    assert p.read(0, 8) == b"defghXYZ" and p.read(5, 3) == b"XYZ" and p.len() == 8
    p.write(b"0123456789")
    assert p.read(0, 8) == b"23456789"
    with pytest.raises(BackendError, match="out of range; the pool holds 8"):
        p.read(4, 5)
    with pytest.raises(BackendError, match="capacity must be a positive int"):
        isa.Pool(0)


@pytest.mark.parametrize("as_iterable", [False, True])
def test_stream_runs_any_size_through_a_fixed_pool(backend, as_iterable):
    n = 50_000
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    got = np.empty(n, np.float32)
    pos = [0]

    def kernel(pool, nbytes):
        return ProgramBuilder().add(isa.ParallelMap(Address.pool(pool), Address.pool(pool), nbytes // 4,
                                                    MapOperation.Relu)).build()

    def sink(pool, nbytes):
        backend.copy_from_pool(pool, 0, got[pos[0]:pos[0] + nbytes // 4])
        pos[0] += nbytes // 4

    source = (x[i:i + 777] for i in range(0, n, 777)) if as_iterable else x
    assert isa.stream(backend, source, kernel, pool_bytes=4096, sink=sink) == 4 * n
    np.testing.assert_array_equal(got, np.maximum(x, 0))


def test_stream_peak_memory_does_not_grow_with_the_input(reference):
    def kernel(pool, nbytes):
        return ProgramBuilder().add(isa.ParallelMap(Address.pool(pool), Address.pool(pool), nbytes // 4,
                                                    MapOperation.Abs)).build()

    def peak(n_chunks):
        chunk = np.ones(1024, np.float32)
        tracemalloc.start()
        isa.stream(reference, (chunk for _ in range(n_chunks)), kernel, pool_bytes=4096)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    peak(1200)  # warm CPython's free lists and caches, which tracemalloc counts as held
    small, large = min(peak(100), peak(100)), min(peak(1000), peak(1000))
    assert large < small + 16384, (small, large)


def test_a_damaged_disk_entry_is_compiled_again(tmp_path):
    import json as _json
    c = isa.ProgramCache(4, directory=tmp_path)
    key = c.key(_prog(), "demo")
    c.disk.put(key, b"not json")
    got = c.get_or_compile(_prog(), lambda p: {"n": len(p)}, "demo", dumps=lambda v: _json.dumps(v).encode(),
                           loads=lambda b: _json.loads(b))
    assert got == {"n": 1} and _json.loads(c.disk.get(key)) == {"n": 1}
