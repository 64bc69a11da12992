"""Kernels compiled ahead of time: the per-type tables of element-wise loops (arrays.table_source), built once per
machine into small Python extension modules in the kernel cache, so a later process runs its first small
element-wise operation without importing numba (numba's import and first compile-or-load cost about 1.2 s;
loading one of these costs about 0.2 ms).

Each module holds numba's own code for the table (the same source the JIT path compiles, as a `cfunc` over
pointers, so results are the same bits), emitted as a position-independent object for this CPU with llvmlite,
linked by the C compiler (`cc`) with a few lines of C that call it with the arrays' buffers after checking their
sizes (`kernel`), and that take NumPy arrays and return a new one (`fresh`, through NumPy's C API, the headers the
installed NumPy ships: the tensor layer's small eager operations, where the checks and the allocation in Python
cost more than the loop). Built in the background the first time a process needs numba for one of these loops (a separate process:
it never holds this one's GIL; a lock file lets one process build), or at once by `eidos cache warm`. Without a
C compiler, Python headers or numba, nothing is built and the JIT path runs as before.

Loading never trusts the files blindly: each module's manifest is sealed (eidos.isa.cache.seal) and names the
Blake3 digest of the module's bytes, checked before the module is imported; anything else is rebuilt.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import blake3

from eidos.errors import UnsupportedError

from ...cache import kernel_dir, seal, unseal, write_atomic
from ...types import Type
from . import arrays

TYPES = (Type.F32, Type.F64, Type.I8, Type.I16, Type.I32, Type.I64, Type.U8, Type.U16, Type.U32, Type.U64)
LOCK_STALE_S = 600   # a build lock older than this is taken to be a build that died
_LOADED: dict[tuple, tuple | None] = {}


def directory() -> Path:
    return kernel_dir("isa-cpu") / "native"


def _name(ty: Type, binary: bool) -> str:
    return f"eidos_native_{ty.name}_{'b' if binary else 'u'}"


def source(ty: Type, binary: bool) -> str:
    """numba source of the table as a C callback: kernel(n, op, d, a, b) over raw pointers (b unused when unary)."""
    dt = f"np.{ty.np_dtype.name}"
    lines = ["import math", "import numpy as np", "from numba import carray, cfunc, types",
             "from eidos.isa.backends.cpu.runtime import *  # noqa: F403", "",
             "@cfunc(types.void(types.int64, types.int64, types.voidptr, types.voidptr, types.voidptr), "
             "error_model='numpy', nogil=True)",
             "def kernel(n, op, dp, ap, bp):",
             f"    d = carray(dp, n, {dt})", f"    a = carray(ap, n, {dt})"]
    if binary:
        lines.append(f"    b = carray(bp, n, {dt})")
    return "\n".join(lines + arrays.table_body(ty, binary, False)) + "\n"


_WRAPPER = r"""
#define PY_SSIZE_T_CLEAN
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <stdint.h>
#include <numpy/arrayobject.h>
extern void kernel(int64_t, int64_t, void *, void *, void *) __asm__("%(symbol)s");
/* numba's C callback wrapper reports exceptions through these; error_model='numpy' loops raise none */
void numba_gil_ensure(PyGILState_STATE *s) { *s = PyGILState_Ensure(); }
void numba_gil_release(PyGILState_STATE *s) { PyGILState_Release(*s); }
void NRT_MemInfo_call_dtor(void *mi) { (void)mi; }

static PyObject *call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer v[3];
    int got = 0, arrays = (int)nargs - 2;
    PyObject *result = NULL;
    if (nargs != %(nargs)d) {
        PyErr_SetString(PyExc_TypeError, "kernel(n, op, out, a%(b)s)");
        return NULL;
    }
    int64_t n = PyLong_AsLongLong(args[0]), op = PyLong_AsLongLong(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (n < 0 || op < 0 || op >= %(nops)d) {
        PyErr_SetString(PyExc_ValueError, "kernel: n must be >= 0 and op one of the table's");
        return NULL;
    }
    for (; got < arrays; got++) {
        if (PyObject_GetBuffer(args[2 + got], &v[got], got == 0 ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS
                                                                : PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (v[got].len < n * %(size)d) {
            PyErr_SetString(PyExc_ValueError, "kernel: an array is shorter than n elements");
            got++;
            goto done;
        }
    }
    kernel(n, op, v[0].buf, v[1].buf, arrays > 2 ? v[2].buf : v[1].buf);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    while (got > 0) PyBuffer_Release(&v[--got]);
    return result;
}

/* fresh(op, limit, a[, b]): the loop over NumPy arrays into a new array of a's dtype and shape, the checks, the
   allocation and the call in one C call (the tensor layer's small eager operations, where these cost more than the
   loop); None where the arrays are not C-contiguous, aligned, writable ndarrays of this type in native byte order,
   of one shape, of at most limit elements (the caller then takes its general path). */
static int fits(PyObject *x, PyArrayObject *like) {
    if (!PyArray_CheckExact(x)) return 0;
    PyArrayObject *a = (PyArrayObject *)x;
    if (!PyArray_ISCARRAY(a) || !PyArray_ISNOTSWAPPED(a) || !PyArray_EquivTypenums(PyArray_TYPE(a), %(npy)s))
        return 0;
    if (like == NULL || like == a) return 1;
    int nd = PyArray_NDIM(a);
    if (nd != PyArray_NDIM(like)) return 0;
    npy_intp *d = PyArray_DIMS(a), *e = PyArray_DIMS(like);
    for (int i = 0; i < nd; i++) if (d[i] != e[i]) return 0;
    return 1;
}

static PyObject *fresh(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != %(nargs)d - 1) {
        PyErr_SetString(PyExc_TypeError, "fresh(op, limit, a%(b)s)");
        return NULL;
    }
    int64_t op = PyLong_AsLongLong(args[0]), limit = PyLong_AsLongLong(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (op < 0 || op >= %(nops)d) {
        PyErr_SetString(PyExc_ValueError, "fresh: op must be one of the table's");
        return NULL;
    }
    if (!fits(args[2], NULL)) Py_RETURN_NONE;
    PyArrayObject *a = (PyArrayObject *)args[2], *b = a;
    if (nargs == 4) {
        if (!fits(args[3], a)) Py_RETURN_NONE;
        b = (PyArrayObject *)args[3];
    }
    npy_intp n = PyArray_SIZE(a);
    if (n > limit) Py_RETURN_NONE;
    PyArray_Descr *dt = PyArray_DESCR(a);
    Py_INCREF(dt);   /* (stolen by PyArray_NewFromDescr) */
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, dt, PyArray_NDIM(a), PyArray_DIMS(a), NULL, NULL, 0, NULL);
    if (out == NULL) return NULL;
    kernel(n, op, PyArray_DATA((PyArrayObject *)out), PyArray_DATA(a), PyArray_DATA(b));
    return out;
}

static PyMethodDef methods[] = {{"kernel", (PyCFunction)(void (*)(void))call, METH_FASTCALL, NULL},
                                {"fresh", (PyCFunction)(void (*)(void))fresh, METH_FASTCALL, NULL}, {NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, methods};
PyMODINIT_FUNC PyInit_%(name)s(void) {
    import_array();
    return PyModule_Create(&module);
}
"""
WRAPPER_DIGEST = blake3.blake3(_WRAPPER.encode()).hexdigest()[:16]


def _toolchain() -> tuple[str, str]:
    """(the C compiler, Python's include folder), or UnsupportedError naming what is missing."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    include = sysconfig.get_paths().get("include") or ""
    if not cc:
        raise UnsupportedError("no C compiler (cc, gcc or clang on PATH, or $CC): the ahead-of-time kernels need "
                               "one to link; the JIT path (numba) runs instead")
    if not Path(include, "Python.h").exists():
        raise UnsupportedError(f"Python's headers are not installed ({include}/Python.h): the ahead-of-time "
                               "kernels need them; the JIT path (numba) runs instead")
    return cc, include


def build(ty: Type, binary: bool, where: Path | None = None) -> Path:
    """Compile ty's table (numba, then llvmlite for this CPU, then cc) into where/<name>.so with its sealed
    manifest; the module's path."""
    import llvmlite.binding as ll
    import numpy

    cc, include = _toolchain()
    where = directory() if where is None else Path(where)
    where.mkdir(parents=True, exist_ok=True)
    name = _name(ty, binary)
    namespace: dict = {}
    exec(compile(source(ty, binary), f"<{name}>", "exec"), namespace)  # noqa: S102 (our own generated source)
    fn = namespace["kernel"]
    target = ll.Target.from_default_triple()
    machine = target.create_target_machine(cpu=ll.get_host_cpu_name(), features=ll.get_host_cpu_features().flatten(),
                                           opt=3, reloc="pic", codemodel="default")
    obj = machine.emit_object(ll.parse_assembly(str(fn._library._final_module)))
    nops = len(arrays.table_ops(ty, binary))
    wrapper = _WRAPPER % {"symbol": fn.native_name, "name": name, "nargs": 5 if binary else 4,
                          "b": ", b" if binary else "", "nops": nops, "size": ty.size_bytes,
                          "npy": f"NPY_{ty.np_dtype.name.upper()}"}
    with tempfile.TemporaryDirectory(dir=where, prefix=".build-") as tmp:
        o, c, so = Path(tmp, "kernel.o"), Path(tmp, "wrapper.c"), Path(tmp, f"{name}.so")
        o.write_bytes(obj)
        c.write_text(wrapper)
        done = subprocess.run([cc, "-shared", "-fPIC", "-O2", f"-I{include}", f"-I{numpy.get_include()}", str(c), str(o),
                               "-o", str(so), "-lm"], capture_output=True, text=True)
        if done.returncode != 0:
            raise UnsupportedError(f"{cc} could not link the ahead-of-time kernel {name}: {done.stderr.strip()[-2000:]}")
        data = so.read_bytes()
        final = where / f"{name}-{blake3.blake3(data).hexdigest()[:16]}.so"   # never overwrite a loaded module
        if not final.exists():
            os.replace(so, final)
    seal(where / f"{name}.json", json.dumps({"module": final.name, "blake3": blake3.blake3(data).hexdigest(),
                                             "ops": [o.name for o in arrays.table_ops(ty, binary)],
                                             "wrapper": WRAPPER_DIGEST}).encode())
    return final


def build_all(where: Path | None = None) -> list[str]:
    """Every table of TYPES, both arities; the names built."""
    out = []
    for ty in TYPES:
        for binary in (False, True):
            build(ty, binary, where)
            out.append(_name(ty, binary))
    return out


def load(ty: Type, binary: bool, where: Path | None = None):
    """(kernel, {operation: op}, fresh) from the ahead-of-time module, without importing numba; None when it is not
    built (or its manifest or bytes do not check out, or an older wrapper made it: then it is removed, to be built
    again). kernel(n, op, out, a[, b]) runs the loop over buffers; fresh(op, limit, a[, b]) over NumPy arrays into a
    new one (see _WRAPPER)."""
    key = (ty, binary, where)
    if key in _LOADED:
        return _LOADED[key]
    found = None
    name = _name(ty, binary)
    try:
        base = directory() if where is None else Path(where)
        raw = unseal(base / f"{name}.json")
        if raw is not None:
            manifest = json.loads(raw)
            path = base / manifest["module"]
            data = path.read_bytes()
            ops = [o.name for o in arrays.table_ops(ty, binary)]
            if blake3.blake3(data).hexdigest() == manifest["blake3"] and manifest["ops"] == ops \
                    and manifest.get("wrapper") == WRAPPER_DIGEST:   # (an older wrapper's module is built again)
                spec = importlib.util.spec_from_file_location(
                    name, path, loader=importlib.machinery.ExtensionFileLoader(name, str(path)))
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                found = (module.kernel, {o: j for j, o in enumerate(arrays.table_ops(ty, binary))}, module.fresh)
            else:
                (base / f"{name}.json").unlink(missing_ok=True)
    except (OSError, ValueError, KeyError, ImportError):
        found = None   # a half-made or foreign folder: the JIT path runs, and a build replaces it
    _LOADED[key] = found
    return found


def warm_in_background(where: Path | None = None) -> bool:
    """Start `python -m eidos.isa.backends.cpu.native` (build_all) detached, unless one is building already,
    EIDOS_CACHE_WARM=0, or the toolchain is missing. Whether one was started."""
    if os.environ.get("EIDOS_CACHE_WARM", "1") in ("0", "", "false", "no"):
        return False
    try:
        _toolchain()
        base = directory() if where is None else Path(where)
        base.mkdir(parents=True, exist_ok=True)
    except (UnsupportedError, OSError):
        return False
    if (base / "build-error.txt").exists():   # this build failed here once (it says why): no retry per process
        return False
    lock = base / ".lock-build"
    try:
        if time.time() - lock.stat().st_mtime > LOCK_STALE_S:
            lock.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    env = dict(os.environ, EIDOS_CACHE_WARM="0")
    args = [sys.executable, "-m", "eidos.isa.backends.cpu.native", str(base), str(lock)]
    subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, cwd=str(base))
    return True


def _main(argv: list[str]) -> int:
    where = Path(argv[0]) if argv else None
    lock = Path(argv[1]) if len(argv) > 1 else None
    try:
        build_all(where)
        return 0
    except Exception as e:   # recorded for `eidos cache` and so that no later process retries; the JIT path runs
        write_atomic((where or directory()) / "build-error.txt", f"{type(e).__name__}: {e}".encode())
        return 1
    finally:
        if lock is not None:
            lock.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
