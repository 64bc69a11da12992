"""join_asof on the polars lane beside native Polars' join_asof, on the same sorted frames, in one run.

    python bench/asof.py [--rows 1000000] [--runs 3]

Trades and quotes of --rows rows each (times sorted, 100 symbols, about 1 in 1000 quotes sharing a
symbol and time); backward and nearest, with `by` and without. Native Polars is handed frames sorted by
`on` and picks among quotes sharing (by, on) by its own rule; eidos prepares its sides (rows with null keys
left out, one quote per (by, on): the first by content, left rows in their own order), so the two agree
on these frames only up to that choice, which the run checks on the rows where it plays no part.
Prints min and median seconds and the ratio eidos/native (min over min).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import pyarrow as pa
from first_queries import timed  # bench/ is the script's folder: python bench/asof.py

import eidos as ei


def main() -> None:
    import polars as pl

    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.rows
    trades = pa.table({"t": np.sort(rng.integers(0, 1000 * n, n)), "sym": rng.integers(0, 100, n),
                       "qty": rng.integers(0, 1000, n)})
    quotes = pa.table({"t": np.sort(rng.integers(0, 1000 * n, n)), "sym": rng.integers(0, 100, n),
                       "px": rng.random(n)})
    left, right = pl.from_arrow(trades), pl.from_arrow(quotes)
    print(f"rows {n:,} each side, load average {os.getloadavg()[0]:.1f}, polars {pl.__version__}")
    for strategy in ("backward", "nearest"):
        for by in (None, "sym"):
            flow = ei.from_arrow(trades).join_asof(ei.from_arrow(quotes), on="t", by=by, strategy=strategy)
            native = lambda: left.join_asof(right, on="t", by=by, strategy=strategy)  # noqa: E731
            eidos = lambda: flow.run(engine="polars")  # noqa: E731
            eidos(), native()
            e_min, e_med, got = timed(eidos, args.runs)
            n_min, n_med, want = timed(native, args.runs)
            assert got.num_rows == want.height and got.column("px").null_count == want["px"].null_count()
            name = f"{strategy}{' by sym' if by else ''}"
            print(f"{name:<18} eidos {e_min:7.3f} / {e_med:7.3f} s   native {n_min:7.3f} / {n_med:7.3f} s   "
                  f"ratio {e_min / n_min:5.1f}x")


if __name__ == "__main__":
    main()
