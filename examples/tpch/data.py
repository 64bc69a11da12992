"""TPC-H data: generate it with tpchgen-cli, stored as zstd parquet with exact types.

Money columns are DECIMAL(15,2), dates are DATE, keys are integers. Strings are
stored as plain Arrow strings (tpchgen-cli writes string views, which some
readers and database loaders do not take).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")
INSTALL_HINT = "pip install tpchgen-cli   (the TPC-H generator, pure Rust, from PyPI)"


class GeneratorMissing(RuntimeError):
    """tpchgen-cli is not installed."""


def tpchgen() -> str:
    """The path of the tpchgen-cli executable, or GeneratorMissing saying how to install it."""
    found = shutil.which("tpchgen-cli") or shutil.which("tpchgen-cli", path=os.path.dirname(sys.executable))
    if found is None:
        raise GeneratorMissing(f"tpchgen-cli is not installed; {INSTALL_HINT}")
    return found


def generate(scale: float, out_dir: str | os.PathLike, *, threads: int | None = None, level: int = 9) -> Path:
    """Write the eight TPC-H tables at `scale` as <out_dir>/<table>.parquet; returns out_dir."""
    exe = tpchgen()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".gen-") as raw:
        cmd = [exe, "parquet", "-s", str(scale), "-o", raw, "-c", "SNAPPY", "--field-ids", "false", "-q"]
        if threads:
            cmd += ["-n", str(threads)]
        subprocess.run(cmd, check=True)
        for name in TABLES:
            recode(os.path.join(raw, f"{name}.parquet"), out / f"{name}.parquet", level)
    return out


def recode(raw: str | os.PathLike, path: Path, level: int) -> None:
    """tpchgen-cli's file at `raw` as `path`: zstd at `level`, plain strings, no nulls declared, row groups of
    2**20 rows; a row group at a time (SF10's lineitem whole would take 18 GB)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = pq.ParquetFile(raw)
    schema = pa.schema([pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type,
                                 nullable=False) for f in source.schema_arrow])
    tmp = path.with_name(f".{path.name}.tmp")
    group = 1 << 20
    with pq.ParquetWriter(tmp, schema, compression="zstd", compression_level=level) as writer:
        pending = schema.empty_table()
        for batch in source.iter_batches(batch_size=group):   # batches end at the source's row groups
            pending = pa.concat_tables([pending, pa.Table.from_batches([batch]).cast(schema)])
            while pending.num_rows >= group:
                writer.write_table(pending.slice(0, group))
                pending = pending.slice(group)
        if pending.num_rows or not source.metadata.num_rows:
            writer.write_table(pending)
    os.replace(tmp, path)


def ensure(scale: float, out_dir: str | os.PathLike, *, level: int = 9) -> Path:
    """Generate the data unless every table is already there."""
    out = Path(out_dir)
    if all((out / f"{name}.parquet").exists() for name in TABLES):
        return out
    return generate(scale, out, level=level)


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description="Generate TPC-H parquet data with tpchgen-cli.")
    p.add_argument("--scale", type=float, default=0.01)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    try:
        print(generate(a.scale, a.out))
    except GeneratorMissing as e:
        sys.exit(str(e))
