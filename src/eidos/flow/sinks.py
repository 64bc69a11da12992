"""Sinks: write a Flow's result to a file atomically.

The result streams into a temporary file beside the target, which is renamed
over it only when complete: after any failure there is no partial file, and
a file that was there before is untouched.
"""

from __future__ import annotations

import os
import tempfile

from eidos.errors import EidosError, ExecutionError, PlanError


def write(flow, path: str | os.PathLike, fmt: str, engine: str | None) -> None:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise PlanError(f"cannot write {path!r}: folder {folder!r} does not exist")
    batches = flow.stream(engine)
    schema = flow.schema.to_arrow()
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        if fmt == "parquet":
            with pq.ParquetWriter(tmp, schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)
        else:
            with pcsv.CSVWriter(tmp, schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)
        os.replace(tmp, path)
    except BaseException as e:
        os.unlink(tmp)
        if isinstance(e, (EidosError, KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        raise ExecutionError(f"writing {fmt} to {path!r} failed: {type(e).__name__}: {e}") from e
