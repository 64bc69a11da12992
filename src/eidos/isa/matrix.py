"""The speed matrix: per operation kind and size, each registered kernel target's measured time.

`measure()` runs one small program per kind on every available target (eidos.isa.registry) in one
process, so the figures compare; `save`/`load` keep the latest result where `eidos backends --matrix`
reads it ($EIDOS_CACHE_DIR or ~/.cache/eidos, matrix.json). bench/matrix.py is the command that
measures at full size and writes docs/matrix.md. Nothing here makes figures up: a cell is a timing
taken in this run, or the reason there is none.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from . import registry
from .codegen.loader import cache_root

SIZES = (1_000, 100_000, 10_000_000)
QUICK_SIZES = (1_000, 100_000)
REFERENCE_MAX = 1_000          # the reference interpreter is timed up to this many elements only
CELL_SECONDS = 0.05            # each timing repeats the program until it has run about this long
F32 = 4


def _prog(*instructions):
    from eidos import isa

    return isa.ProgramBuilder().add(*instructions).build()


def _array_case(build: Callable) -> Callable:
    """A case over float32 buffers a, b, c of n elements: build(A, B, C, n) -> (program, launch)."""

    def make(be, n: int):
        from eidos.isa import Address, LaunchConfig

        hs = [be.allocate_buffer(F32 * n) for _ in range(3)]
        be.copy_to_buffer(hs[0], np.linspace(-1, 1, n, dtype=np.float32))
        be.copy_to_buffer(hs[1], np.linspace(2, -2, n, dtype=np.float32))
        program, params = build(*(Address.buffer(h) for h in hs), n, hs)
        return program, params or LaunchConfig.linear(1)
    return make


def _map(A, B, C, n, hs):
    from eidos import isa

    return _prog(isa.ParallelMap(C, A, n, isa.MapOperation.Exp)), None


def _binary(A, B, C, n, hs):
    from eidos import isa

    return _prog(isa.ParallelMapBinary(C, A, B, n, isa.BinaryMapOperation.Add)), None


def _chain(A, B, C, n, hs):
    from eidos import isa

    BM = isa.BinaryMapOperation
    return _prog(isa.ParallelMapBinary(C, A, B, n, BM.Mul), isa.ParallelMapBinary(C, C, A, n, BM.Add),
                 isa.ParallelMap(C, C, n, isa.MapOperation.Relu)).optimize(), None


def _reduce(A, B, C, n, hs):
    from eidos import isa
    from eidos.isa import Register

    return _prog(isa.ParallelReduce(Register(0), A, n, isa.ReduceOperation.Sum)), None


def _register(A, B, C, n, hs):
    """Per-lane code: c[i] = a[i] * 0.5 + b[i], addresses from the global id."""
    from eidos import isa
    from eidos.isa import Address, ExecutionParams, LaunchConfig, Special, Type
    from eidos.isa import Register as R

    U64 = Type.U64
    program = _prog(
        isa.MOV(R(0), Special.GLOBAL_ID, U64), isa.MOV_IMM(R(1), F32, U64), isa.MUL(R(2), R(0), R(1), U64),
        isa.ADD(R(3), R(10), R(2), U64), isa.ADD(R(4), R(11), R(2), U64), isa.ADD(R(5), R(12), R(2), U64),
        isa.LDG(R(6), Address.register(R(3)), Type.F32), isa.LDG(R(7), Address.register(R(4)), Type.F32),
        isa.MOV_IMM(R(8), 0.5, Type.F32), isa.FMA(R(9), R(6), R(8), R(7), Type.F32),
        isa.STG(Address.register(R(5)), R(9), Type.F32))
    return program, ExecutionParams(LaunchConfig.linear(n), {10 + k: isa.pointer(h) for k, h in enumerate(hs)})


def _gemm_side(n: int) -> int:
    return max(1, round(n ** 0.5))


def _gemm(be, n: int):
    """C = A @ B over square float32 matrices of about n elements each."""
    from eidos import isa
    from eidos.isa import Address, LaunchConfig, Type

    s = _gemm_side(n)
    hs = [be.allocate_buffer(F32 * s * s) for _ in range(3)]
    rng = np.random.default_rng(0)
    for h in hs[:2]:
        be.copy_to_buffer(h, rng.standard_normal(s * s, dtype=np.float32))
    a, b, c = (Address.buffer(h) for h in hs)
    return _prog(isa.GEMM(c, a, b, s, s, s, 1.0, 0.0, Type.F32)), LaunchConfig.linear(1)


# kind: (what it runs, bytes it moves for n elements, floating-point operations for n, make(target, n))
KINDS: dict[str, tuple[str, Callable[[int], int], Callable[[int], int] | None, Callable]] = {
    "map": ("c = exp(a), ParallelMap f32", lambda n: 2 * F32 * n, None, _array_case(_map)),
    "binary map": ("c = a + b, ParallelMapBinary f32", lambda n: 3 * F32 * n, None, _array_case(_binary)),
    "fused chain": ("c = relu(a * b + a), three array instructions the optimizer fuses", lambda n: 3 * F32 * n, None,
                    _array_case(_chain)),
    "reduction": ("sum(a), ParallelReduce f32", lambda n: F32 * n, None, _array_case(_reduce)),
    "gemm": ("C = A @ B, GEMM f32, square, n elements per matrix", lambda n: 3 * F32 * _gemm_side(n) ** 2,
             lambda n: 2 * _gemm_side(n) ** 3, _gemm),
    "register program": ("c[i] = a[i] * 0.5 + b[i], per-lane LDG/FMA/STG", lambda n: 3 * F32 * n, None,
                         _array_case(_register)),
}


def _launch(be, program, launch) -> None:
    from eidos.isa import ExecutionParams

    if isinstance(launch, ExecutionParams):
        be.execute_program_with_params(program, launch)
    else:
        be.execute_program(program, launch)


def _time(run: Callable[[], object], sync: Callable[[], object], repeats: int) -> list[float]:
    """Seconds per call of run(), `repeats` timings of about CELL_SECONDS each, after one untimed call
    (compiling, caching); sync() waits for work a call left running (a GPU's)."""
    run()
    sync()
    t = time.perf_counter()
    run()
    sync()
    once = time.perf_counter() - t
    number = max(1, min(10_000, int(CELL_SECONDS / max(once, 1e-9))))
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            run()
        sync()
        out.append((time.perf_counter() - t) / number)
    return out


def machine() -> dict:
    """Where the figures were measured."""
    from eidos.hal.devices import detect_devices

    d = detect_devices()
    return {"host": platform.node(), "platform": platform.platform(), "processor": platform.processor() or
            platform.machine(), "cpu_cores": d.cpu_cores, "gpus": list(d.gpu_names),
            "python": platform.python_version(), "numpy": np.__version__,
            "triton_interpret": os.environ.get("TRITON_INTERPRET", "")}


def limits(n: int = 1 << 22, repeats: int = 5) -> dict:
    """The memory bandwidth the figures sit under, measured in the same run: a host copy (NumPy, one
    thread) and, where there is a GPU and torch sees it, a device-to-device copy; GB/s of bytes read
    and written, n float32 elements."""
    from eidos.hal.devices import detect_devices

    src, dst = np.ones(n, dtype=np.float32), np.empty(n, dtype=np.float32)
    out = {"host copy, one thread (NumPy)": 8 * n / min(_time(lambda: np.copyto(dst, src), lambda: None, repeats)) / 1e9}
    if detect_devices().gpu_count == 0:
        return out
    try:
        import torch
    except ImportError:
        return out
    if torch.cuda.is_available():
        a, b = torch.ones(n, device="cuda"), torch.empty(n, device="cuda")
        seconds = min(_time(lambda: b.copy_(a), torch.cuda.synchronize, repeats))
        out[f"device copy ({torch.cuda.get_device_name()}, torch)"] = 8 * n / seconds / 1e9
    return out


def measure(sizes=SIZES, repeats: int = 5, *, kinds=None, targets=None, reference_max: int = REFERENCE_MAX,
            command: str = "", progress: Callable[[str], None] | None = None) -> dict:
    """Time every kind at every size on every available target of this machine (or those named); returns the result
    that save() writes: machine, date, command, the targets with their availability, and one cell per
    (kind, size, target) with min and median seconds and GB/s (GFLOP/s for GEMM), or why not measured."""
    infos = [registry.info(n) for n in (targets or [n for n in registry.names() if n not in registry.ELSEWHERE])]
    kinds = list(kinds or KINDS)
    cells = []
    for kind in kinds:
        what, nbytes, flops, make = KINDS[kind]
        for n in sizes:
            for info in infos:
                cell = {"kind": kind, "size": n, "target": info.name}
                if not info.available:
                    cell["skipped"] = f"unavailable: {info.reason}"
                elif info.name == "reference" and n > reference_max:
                    cell["skipped"] = f"the reference interpreter is timed up to {reference_max:,} elements"
                else:
                    if progress:
                        progress(f"{kind}, {n:,} elements, {info.name}")
                    be = registry.create(info.name)
                    program, launch = make(be, n)
                    sync = getattr(be, "synchronize", lambda: None)   # a target that runs asynchronously waits
                    times = _time(lambda be=be, program=program, launch=launch: _launch(be, program, launch), sync, repeats)
                    lo, med = min(times), statistics.median(times)
                    cell.update(min_s=lo, median_s=med, gbps=nbytes(n) / lo / 1e9)
                    if flops is not None:
                        cell["gflops"] = flops(n) / lo / 1e9
                cells.append(cell)
    return {"machine": machine(), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": command, "repeats": repeats, "sizes": list(sizes), "limits": limits(max(*sizes, 1 << 22)),
            "kinds": {k: KINDS[k][0] for k in kinds},
            "targets": [{"name": i.name, "source": i.source, "available": i.available, "reason": i.reason}
                        for i in infos],
            "cells": cells}


def default_path() -> Path:
    """matrix.json in eidos's cache folder (the one the compiled targets keep their code in)."""
    return cache_root() / "matrix.json"


def save(result: dict, path: str | os.PathLike | None = None) -> Path:
    """Write the result atomically (default: default_path())."""
    path = Path(path or default_path())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, path)
    return path


def load(path: str | os.PathLike | None = None) -> dict | None:
    """The saved result, or None when nothing was measured there."""
    path = Path(path or default_path())
    return json.loads(path.read_text()) if path.exists() else None


def _seconds(s: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def _rate(x: float, unit: str) -> str:
    return f"{x:,.0f} {unit}" if x >= 100 else f"{x:.3g} {unit}"


def table(result: dict) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): one row per kind and size, one column per target: min time and the rate
    (GB/s; GFLOP/s for GEMM), or '-' where the target was not timed."""
    names = [t["name"] for t in result["targets"]]
    rows: dict[tuple[str, int], dict[str, str]] = {}
    for c in result["cells"]:
        row = rows.setdefault((c["kind"], c["size"]), {})
        if "skipped" in c:
            row[c["target"]] = "-"
        else:
            rate = _rate(c["gflops"], "GFLOP/s") if "gflops" in c else _rate(c["gbps"], "GB/s")
            row[c["target"]] = f"{_seconds(c['min_s'])} ({rate})"
    return (["operation", "elements", *names],
            [[kind, f"{n:,}", *(row.get(t, "-") for t in names)] for (kind, n), row in rows.items()])


def provenance(result: dict) -> list[str]:
    """Lines saying when, where and how the figures were measured, and why a target has none."""
    m = result["machine"]
    where = f"{m['host']}: {m['processor']}, {m['cpu_cores']} cores, {m['platform']}"
    if m["gpus"]:
        where += f", GPUs: {', '.join(m['gpus'])}"
    lines = [f"measured {result['date']} on {where}; python {m['python']}, numpy {m['numpy']}"
             + (f", TRITON_INTERPRET={m['triton_interpret']}" if m["triton_interpret"] else ""),
             f"command: {result['command'] or '(not recorded)'}; each cell the min of {result['repeats']} timing(s)"]
    lines += [f"limit, {what}: {_rate(gbps, 'GB/s')}" for what, gbps in result.get("limits", {}).items()]
    lines += [f"{t['name']}: not measured, unavailable: {t['reason']}" for t in result["targets"] if not t["available"]]
    ref = {c["skipped"] for c in result["cells"] if c["target"] == "reference" and "skipped" in c
           and not c["skipped"].startswith("unavailable")}
    lines += [f"reference: {r}" for r in sorted(ref)]
    return lines


__all__ = ["KINDS", "SIZES", "QUICK_SIZES", "measure", "machine", "save", "load", "default_path", "table",
           "provenance"]
