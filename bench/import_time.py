"""How long `import eidos` takes, next to `import polars` and `import duckdb`, and what it pulls in.

Each import runs in a fresh interpreter, several times; the figure is the wall
time of the import statement inside that interpreter (interpreter start-up is
measured separately as `(nothing)` and not subtracted). Reports min and median.
Fails (exit 1) when `import eidos` loads a heavy engine.

    python bench/import_time.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys

HEAVY = ("polars", "duckdb", "numba", "torch", "ray", "sqlglot", "triton", "pandas", "adbc_driver_manager")

PROBE = """
import json, sys, time
t = time.perf_counter()
{stmt}
dt = time.perf_counter() - t
print(json.dumps({{"seconds": dt, "modules": sorted(m.split('.')[0] for m in sys.modules)}}))
"""


def measure(module: str | None, runs: int) -> tuple[list[float], set[str]]:
    stmt = f"import {module}" if module else "pass"
    times, modules = [], set()
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", PROBE.format(stmt=stmt)], capture_output=True, text=True,
                             check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        times.append(result["seconds"])
        modules = set(result["modules"])
    return times, modules


def version(module: str) -> str:
    out = subprocess.run([sys.executable, "-c", f"import {module}; print({module}.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per module (default 15)")
    args = parser.parse_args()

    rows = {}
    baseline_modules: set[str] = set()
    for module in (None, "eidos", "polars", "duckdb", "pyarrow"):
        times, modules = measure(module, args.runs)
        rows[module or "(nothing)"] = (min(times), statistics.median(times))
        if module is None:
            baseline_modules = modules
        if module == "eidos":
            eidos_modules = modules

    print(f"python {platform.python_version()} on {platform.machine()}, {args.runs} fresh interpreters each")
    print(f"{'import':<12} {'version':>10} {'min ms':>9} {'median ms':>10} {'median / eidos':>15}")
    eidos_median = rows["eidos"][1]
    for name, (lo, med) in rows.items():
        ver = version(name) if name != "(nothing)" else ""
        ratio = f"{med / eidos_median:.2f}x" if name != "(nothing)" else ""
        print(f"{name:<12} {ver:>10} {lo * 1e3:>9.1f} {med * 1e3:>10.1f} {ratio:>15}")

    pulled = sorted(m for m in HEAVY if m in eidos_modules)
    new = sorted(eidos_modules - baseline_modules)
    print(f"top-level modules `import eidos` adds: {len(new)} ({', '.join(m for m in new if not m.startswith('_'))})")
    if pulled:
        print(f"FAIL: `import eidos` loaded heavy modules: {', '.join(pulled)}")
        return 1
    print(f"ok: none of {', '.join(HEAVY)} loaded by `import eidos`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
