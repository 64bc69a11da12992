"""The answers the TPC-H tests compare with: the specification's SQL run in DuckDB.

DuckDB's tpch extension (with its `tpch_answers()`) has no build for the DuckDB
installed here, so the answers come from running the query text of `sql.py` in
DuckDB over the very parquet files the tests read.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # the repository root, not this folder

from examples.tpch import sql  # noqa: E402


def compute(data_dir: str | os.PathLike) -> dict:
    """Each query's answer as a pyarrow Table, in the query's ORDER BY order."""
    import duckdb

    con = duckdb.connect()
    return {name: con.sql(sql.over_parquet(name, os.fspath(data_dir))).to_arrow_table()
            for name in sql.QUERIES}


def write(data_dir: str | os.PathLike, out_dir: str | os.PathLike) -> None:
    import pyarrow.parquet as pq

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in compute(data_dir).items():
        pq.write_table(table, out / f"{name}.parquet", compression="zstd")


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description="Compute TPC-H answers with DuckDB over parquet data.")
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    write(a.data, a.out)
