"""The compiled-kernel cache on disk (eidos.isa.cache, the cpu target's sealed numba cache and its ahead-of-time
tables): one process's compile is another's load, with the same results; damaged, foreign or other libraries'
entries are compiled again, never loaded; several processes may write at once; the folder stays bounded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from eidos.errors import BackendError
from eidos.isa import cache as C
from eidos.isa.types import Type

REPO = Path(__file__).parents[2]

# One process: run a compiled register program and small element-wise tables, report the results' bytes and
# numba's cache statistics (hits: loaded from disk; misses: compiled).
_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from eidos import isa
    from eidos.isa.backends.cpu import CpuBackend
    from eidos.isa.backends.cpu.arrays import table_kernel
    from tests.isa.test_cpu import lane_program
    be = CpuBackend()
    n = 64
    a, out = be.allocate_buffer(4 * n), be.allocate_buffer(4 * n)
    x = np.linspace(-3, 3, n, dtype=np.float32)
    be.copy_to_buffer(a, x)
    p = lane_program()
    be.execute_program_with_params(p, isa.ExecutionParams(isa.LaunchConfig.linear(n), {10: isa.pointer(a), 11: isa.pointer(out)}))
    res = np.zeros(n, np.float32); be.copy_from_buffer(out, res)
    k, index = table_kernel(isa.Type.F32, False, False, be.cache_dir)
    e = np.empty_like(x); k(n, index[isa.MapOperation.Exp], e, x)
    fns = [be.plan(p).compiled.run_seq, k]
    print(json.dumps({"hits": sum(sum(f.stats.cache_hits.values()) for f in fns),
                      "misses": sum(sum(f.stats.cache_misses.values()) for f in fns),
                      "result": res.tobytes().hex(), "exp": e.tobytes().hex(), "numba": "numba" in sys.modules}))
""")


def _env(root: Path, **extra) -> dict:
    return dict(os.environ, EIDOS_CACHE_DIR=str(root), EIDOS_CACHE_WARM="0", **extra)


def _child(root: Path, code: str = _CHILD) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(root), cwd=str(REPO))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _numba_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".nbi", ".nbc"))


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A cache root of the test's own, for this process too."""
    r = tmp_path / "cache"
    monkeypatch.setenv("EIDOS_CACHE_DIR", str(r))
    return r


def test_a_kernel_compiled_in_one_process_is_loaded_in_another(root):
    pytest.importorskip("numba")
    first = _child(root)
    second = _child(root)
    assert first["misses"] >= 2 and first["hits"] == 0
    assert second["hits"] >= 2 and second["misses"] == 0
    assert (second["result"], second["exp"]) == (first["result"], first["exp"])
    tag = C.build_tag()
    assert all(tag in p.parts for p in _numba_files(root))     # under isa-cpu/<build tag>/
    assert (root / ".key").stat().st_mode & 0o077 == 0


def test_a_damaged_cache_file_is_compiled_again_and_rewritten(root):
    pytest.importorskip("numba")
    first = _child(root)
    ours = [p for p in _numba_files(root) if C.build_tag() in p.parts]
    assert ours
    for p in ours:                                              # damaged, and unsealed pickles (numba's own format)
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2] + b"\x00garbage" if p.suffix == ".nbc" else b"\x80\x04K\x01.")
    again = _child(root)
    assert again["misses"] >= 2 and again["hits"] == 0          # nothing of the damaged files was used
    assert (again["result"], again["exp"]) == (first["result"], first["exp"])
    for p in _numba_files(root):
        if C.build_tag() in p.parts:
            assert C.unseal(p) is not None                      # rewritten, sealed
    assert _child(root)["misses"] == 0


def test_a_foreign_or_moved_file_is_not_loaded(root):
    path = C.kernel_dir("isa-cpu") / "entry.bin"
    C.seal(path, b"payload")
    assert C.unseal(path) == b"payload"
    moved = path.with_name("other.bin")
    shutil.copy(path, moved)
    assert C.unseal(moved) is None and not moved.exists()       # bound to its name
    raw = path.read_bytes()
    foreign = path.with_name("foreign.bin")
    foreign.write_bytes(raw[:15] + bytes(32) + raw[47:])
    assert C.unseal(foreign) is None and not foreign.exists()
    plain = path.with_name("plain.bin")
    plain.write_bytes(b"payload")
    assert C.unseal(plain) is None


def test_the_key_changes_with_the_library_versions():
    v = C.build_versions()
    assert set(v) >= {"python", "eidos", "numpy", "numba", "llvmlite", "cpu"}
    tags = {C.build_tag({**v, name: v[name] + "x"}) for name in ("numba", "numpy", "llvmlite", "eidos", "cpu")}
    assert len(tags | {C.build_tag()}) == 6

    class P:
        def digest(self):
            return "d" * 64

    pc = C.ProgramCache()
    key = pc.key(P(), "cpu")
    assert set(pc.versions) >= {"numba", "llvmlite", "numpy", "eidos", "cpu"}
    pc._versions = {**pc.versions, "llvmlite": "0.0"}
    assert pc.key(P(), "cpu") != key


_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from eidos.isa import cache as C
    path = Path(sys.argv[1])
    for i in range(200):
        C.seal(path, (sys.argv[2] * 1000 + str(i)).encode())
        assert C.unseal(path) is not None or not path.exists()
""")


def test_concurrent_writers_do_not_corrupt_it(root):
    path = C.kernel_dir("isa-cpu") / "shared.bin"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), w], env=_env(root), cwd=str(REPO),
                              stderr=subprocess.PIPE, text=True) for w in "abc"]
    for p in procs:
        assert p.wait() == 0, p.stderr.read()
    payload = C.unseal(path).decode()
    assert payload[:1000] in ("a" * 1000, "b" * 1000, "c" * 1000)
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]


def test_concurrent_compiles_of_one_kernel_leave_a_loadable_cache(root):
    pytest.importorskip("numba")
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD], env=_env(root), cwd=str(REPO), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    outs = []
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert len({(o["result"], o["exp"]) for o in outs}) == 1
    last = _child(root)
    assert last["misses"] == 0 and (last["result"], last["exp"]) == (outs[0]["result"], outs[0]["exp"])


def test_trim_drops_other_builds_then_the_least_recently_used(root):
    mine = C.kernel_dir("isa-cpu")
    old = root / "isa-cpu" / "0123456789abcdef"
    old.mkdir(parents=True)
    (old / "prog_old.py").write_bytes(b"x" * 4000)
    for i, name in enumerate(("prog_a", "prog_b", "prog_c")):
        (mine / f"{name}.py").write_bytes(b"x" * 1000)
        (mine / "__pycache__").mkdir(exist_ok=True)
        (mine / "__pycache__" / f"{name}.run_seq-8.py311.nbi").write_bytes(b"x" * 1000)
        for f in (mine / f"{name}.py", mine / "__pycache__" / f"{name}.run_seq-8.py311.nbi"):
            os.utime(f, (1000 + i, 1000 + i))
    assert C.usage(root)["bytes"] == 10000
    assert C.trim(limit=20000) == 0
    freed = C.trim(limit=4000)                      # to 3200 bytes: the other build, then prog_a and prog_b
    assert freed == 8000 and not old.exists()
    assert sorted(p.name for p in mine.glob("prog_*")) == ["prog_c.py"]
    assert C.usage(root)["bytes"] == 2000
    assert C.clear(root) == 2000 and C.usage(root)["bytes"] == 0


def test_a_root_others_may_write_is_refused(root):
    root.mkdir(parents=True)
    root.chmod(0o777)
    with pytest.raises(BackendError, match="writable by others"):
        C.kernel_dir("isa-cpu")
    root.chmod(0o700)


def test_the_size_limit_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("EIDOS_CACHE_MAX_MB", "3")
    assert C.max_bytes() == 3 << 20
    monkeypatch.setenv("EIDOS_CACHE_MAX_MB", "lots")
    with pytest.raises(BackendError, match="EIDOS_CACHE_MAX_MB"):
        C.max_bytes()


# ---- the tables compiled ahead of time ----------------------------------------------------------------------

_AOT_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from eidos.isa import instructions as I
    from eidos.isa.types import Type
    from eidos.isa.backends.cpu import native
    out = {}
    for ty, binary, ops in ((Type.F32, True, ("Add", "Pow", "Max", "Atan2")), (Type.F32, False, ("Exp", "Sin", "Sigmoid")),
                            (Type.I64, True, ("Div", "Min"))):
        k, index, _fresh = native.load(ty, binary)
        dt = ty.np_dtype
        a = np.array([-2.5, -1, 0, 0.5, 3, np.nan, np.inf, 7] if ty.is_float else [-7, -1, 0, 5, 9, 2**62, -2**63, 3], dt)
        b = np.array([1.5, 0, -0.0, 2, -3, 1, np.nan, 7] if ty.is_float else [2, 0, -3, 5, -9, 3, -1, 1], dt)
        for name in ops:
            op = getattr(I.BinaryMapOperation if binary else I.MapOperation, name)
            d = np.zeros_like(a)
            k(len(a), index[op], d, a, b) if binary else k(len(a), index[op], d, a)
            out[f"{ty.name}.{name}"] = d.tobytes().hex()
    out["numba"] = "numba" in sys.modules
    print(json.dumps(out))
""")


@pytest.fixture
def native(root):
    """eidos.isa.backends.cpu.native where it can build modules here (numba and a C toolchain), else a skip naming why."""
    pytest.importorskip("numba")
    from eidos.isa.backends.cpu import native

    try:
        native._toolchain()
    except Exception as e:  # noqa: BLE001 - whatever stops the build is the reason to skip
        pytest.skip(str(e))
    return native


def test_tables_built_ahead_of_time_load_without_numba_and_match_the_jit(root, native):
    from eidos.isa import instructions as I
    from eidos.isa.backends.cpu import arrays

    for ty, binary in ((Type.F32, True), (Type.F32, False), (Type.I64, True)):
        native.build(ty, binary)
    got = _child(root, _AOT_CHILD)
    assert got.pop("numba") is False                            # loaded and run without importing numba
    for key, hexed in got.items():
        tyname, name = key.split(".")
        ty = Type[tyname]
        binary = hasattr(I.BinaryMapOperation, name) and not hasattr(I.MapOperation, name)
        k, index = arrays.table_kernel(ty, binary, False, C.kernel_dir("isa-cpu"))
        a = np.array([-2.5, -1, 0, 0.5, 3, np.nan, np.inf, 7] if ty.is_float else [-7, -1, 0, 5, 9, 2**62, -2**63, 3],
                     ty.np_dtype)
        b = np.array([1.5, 0, -0.0, 2, -3, 1, np.nan, 7] if ty.is_float else [2, 0, -3, 5, -9, 3, -1, 1], ty.np_dtype)
        d = np.zeros_like(a)
        op = getattr(I.BinaryMapOperation if binary else I.MapOperation, name)
        k(len(a), index[op], d, a, b) if binary else k(len(a), index[op], d, a)
        assert d.tobytes().hex() == hexed, key                  # the same bits as the JIT path

    # a module whose bytes changed is not imported (and its manifest goes, so it is built again)
    native._LOADED.clear()
    so = next(native.directory().glob("eidos_native_I64_b-*.so"))
    data = bytearray(so.read_bytes())
    data[-1] ^= 0xFF
    so.write_bytes(bytes(data))
    assert native.load(Type.I64, True) is None
    assert not (native.directory() / "eidos_native_I64_b.json").exists()
    native._LOADED.clear()


def test_the_native_kernel_checks_its_arguments(root, native):
    native.build(Type.F64, True)
    native._LOADED.clear()
    k, _, _ = native.load(Type.F64, True)
    a = np.ones(4)
    with pytest.raises(ValueError, match="shorter than n"):
        k(8, 0, np.empty(4), a, a)
    with pytest.raises(ValueError, match="op one of"):
        k(4, 99, np.empty(4), a, a)
    with pytest.raises(TypeError):
        k(4, 0, np.empty(4), a)
    native._LOADED.clear()


class _Sub(np.ndarray):
    pass


def _operand(data, dt, like_shape):
    """An array for fresh: of dt or another dtype, contiguous or not, writable or not, an ndarray or not."""
    shape = data.draw(st.sampled_from([like_shape, like_shape, like_shape, (3,), (2, 2), ()]), "shape")
    kind = data.draw(st.sampled_from(["plain"] * 6 + ["other dtype", "swapped", "strided", "read-only", "subclass",
                                                      "list", "none"]), "kind")
    if kind == "none":
        return None   # (a tensor not realized yet)
    x = data.draw(hnp.arrays(dt, shape, elements=hnp.from_dtype(dt, allow_subnormal=False)), "values")
    if kind == "other dtype":
        return x.astype(np.float64 if dt != np.float64 else np.float32)
    if kind == "swapped":
        return x.astype(dt.newbyteorder())
    if kind == "strided":
        return np.repeat(x[..., None], 2, axis=-1)[..., 0] if x.ndim else x
    if kind == "read-only":
        x.flags.writeable = False
    if kind == "subclass":
        return x.view(_Sub)
    return x.tolist() if kind == "list" else x


def test_fresh_in_c_equals_fresh_in_python(root, monkeypatch, native):
    """The native modules' fresh (checks, allocation and loop in C) and direct_map's over numba's loop (Python) refuse
    the same arrays and give the same new arrays, bit for bit the loop's, on generated operands."""
    from eidos.isa import instructions as I
    from eidos.isa.backends.cpu import CpuBackend, arrays

    cases = [(Type.F32, I.BinaryMapOperation.Add), (Type.F32, I.BinaryMapOperation.Pow), (Type.F32, I.MapOperation.Exp),
             (Type.I64, I.BinaryMapOperation.Sub), (Type.I64, I.BinaryMapOperation.Div)]
    for ty, binary in {(ty, isinstance(op, I.BinaryMapOperation)) for ty, op in cases}:
        native.build(ty, binary)
    native._LOADED.clear()
    be = CpuBackend()
    c = [arrays.direct_map(op, ty, be) for ty, op in cases]
    assert all(type(f).__name__ == "builtin_function_or_method" for f, _ in c)
    monkeypatch.setattr(arrays, "native_table", lambda *args: None)
    py = [arrays.direct_map(op, ty, be) for ty, op in cases]
    assert all(type(f).__name__ == "function" for f, _ in py)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data):
        i = data.draw(st.integers(0, len(cases) - 1), "case")
        ty, op = cases[i]
        dt = ty.np_dtype
        shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4), "like")
        args = [_operand(data, dt, shape)]
        if isinstance(op, I.BinaryMapOperation):
            args.append(_operand(data, dt, shape))
        limit = data.draw(st.sampled_from([0, 5, 1 << 16]), "limit")
        with np.errstate(all="ignore"):
            got, want = c[i][0](c[i][1], limit, *args), py[i][0](py[i][1], limit, *args)
        if want is None:
            assert got is None
            return
        assert got is not None and type(got) is np.ndarray and got.flags.carray
        assert (got.dtype, got.shape, got.tobytes()) == (want.dtype, want.shape, want.tobytes())
        assert not any(np.shares_memory(got, a) for a in args)

    check()
    f, op = c[0]
    with pytest.raises(TypeError, match=r"fresh\(op, limit, a, b\)"):
        f(op, 10, np.ones(2, np.float32))
    with pytest.raises(ValueError, match="op must be one of"):
        f(999, 10, np.ones(2, np.float32), np.ones(2, np.float32))
    native._LOADED.clear()


def test_a_module_an_older_wrapper_made_is_built_again(root, native):
    native.build(Type.F64, False)
    native._LOADED.clear()
    manifest = native.directory() / "eidos_native_F64_u.json"
    old = json.loads(C.unseal(manifest))
    old.pop("wrapper")
    C.seal(manifest, json.dumps(old).encode())
    assert native.load(Type.F64, False) is None and not manifest.exists()
    native._LOADED.clear()


def test_the_cache_command_shows_and_clears_it(root, capsys):
    from eidos.cli import main

    C.seal(C.kernel_dir("isa-cpu") / "entry.bin", b"x" * 100)
    assert main(["cache", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["root"] == str(root) and info["bytes"] > 100 and info["build_tag"] == C.build_tag()
    assert main(["cache", "clear"]) == 0
    assert "removed" in capsys.readouterr().out and C.usage(root)["bytes"] == 0
