"""How long `import eidos` takes, next to `import polars` and `import duckdb`, and what it pulls in.

Each import runs in a fresh interpreter; the figure is the wall time of the
import statement inside that interpreter (start-up excluded). The modules take
turns round by round, so a noisy machine weighs on all alike. Reports min and
median. `eidos (pyarrow loaded)` times `import eidos` after `import pyarrow`:
what eidos itself adds over its one required heavy dependency.
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
{setup}
t = time.perf_counter()
{stmt}
dt = time.perf_counter() - t
print(json.dumps({{"seconds": dt, "modules": sorted(m.split('.')[0] for m in sys.modules)}}))
"""


CASES = {  # name: (setup, statement)
    "eidos": ("", "import eidos"),
    "polars": ("", "import polars"),
    "duckdb": ("", "import duckdb"),
    "pyarrow": ("", "import pyarrow"),
    "eidos (pyarrow loaded)": ("import pyarrow", "import eidos"),
}


def once(setup: str, stmt: str) -> tuple[float, set[str]]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(setup=setup, stmt=stmt)], capture_output=True,
                         text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["seconds"], set(result["modules"])


def version(module: str) -> str:
    out = subprocess.run([sys.executable, "-c", f"import {module}; print({module}.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per module (default 15)")
    args = parser.parse_args()

    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.runs):
        for name, (setup, stmt) in CASES.items():
            seconds, modules = once(setup, stmt)
            times[name].append(seconds)
            if name == "eidos":
                eidos_modules = modules
    _, baseline_modules = once("", "pass")

    print(f"python {platform.python_version()} on {platform.machine()}, {args.runs} fresh interpreters each")
    print(f"{'import':<23} {'version':>8} {'min ms':>8} {'median ms':>10} {'eidos / this (median)':>22}")
    eidos_median = statistics.median(times["eidos"])
    for name, ts in times.items():
        module = CASES[name][1].split()[1]
        med = statistics.median(ts)
        print(f"{name:<23} {version(module):>8} {min(ts) * 1e3:>8.1f} {med * 1e3:>10.1f} "
              f"{eidos_median / med:>21.2f}x")

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
