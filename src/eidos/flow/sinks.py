"""Sinks: write a Flow's result to a file atomically.

The result streams into a temporary file beside the target, which is renamed
over it only when complete: after any failure there is no partial file, and
a file that was there before is untouched. A new file gets the mode the umask
gives (as any tool's would); a file written over keeps its mode; a symbolic
link is written through, to the file it names. `atomic` does the same for
any writer (the command's demo files).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator

from eidos.errors import EidosError, ExecutionError, PlanError


def write(flow, path: str | os.PathLike, fmt: str, engine: str | None, address: str | None = None) -> None:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    with atomic(path, fmt) as tmp:
        batches = flow.stream(engine, address=address)
        schema = flow.schema.to_arrow()
        if fmt == "parquet":
            with pq.ParquetWriter(tmp, schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)
        else:
            with pcsv.CSVWriter(tmp, schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)


@contextlib.contextmanager
def atomic(path: str | os.PathLike, fmt: str) -> Iterator[str]:
    """The name of a new temporary file beside `path` to write `fmt` data into; renamed over `path` when
    the block ends, removed when it raises (any error but an EidosError becomes an ExecutionError)."""
    path = os.fspath(path)
    target = os.path.realpath(path) if os.path.islink(path) else path
    if os.path.isdir(target):
        raise PlanError(f"cannot write {path!r}: it is a folder; give a file name such as "
                        f"{os.path.join(path, 'out.' + fmt)!r}")
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise PlanError(f"cannot write {path!r}: folder {folder!r} does not exist")
    tmp = _temporary(target, folder, path)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, (EidosError, KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        raise ExecutionError(f"writing {fmt} to {path!r} failed: {type(e).__name__}: {e}") from e


def _temporary(target: str, folder: str, shown: str) -> str:
    """A new empty file beside `target`: with the target's mode when it exists, else 0666 less the umask
    (the kernel applies it, so no process-wide umask is read or changed)."""
    try:
        keep = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        keep = None
    except OSError as e:
        raise PlanError(f"cannot write {shown!r}: {e.strerror}") from e
    for _ in range(100):
        tmp = os.path.join(folder, f".{os.path.basename(target)}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if keep is not None else 0o666)
        except FileExistsError:
            continue
        except OSError as e:
            raise PlanError(f"cannot write {shown!r}: cannot create a file in {folder!r}: {e.strerror}") from e
        try:
            if keep is not None:
                os.fchmod(fd, keep)
        except OSError as e:
            os.close(fd)
            os.unlink(tmp)
            raise PlanError(f"cannot write {shown!r}: cannot give the new file the old one's mode: "
                            f"{e.strerror}") from e
        os.close(fd)
        return tmp
    raise PlanError(f"cannot write {shown!r}: no free temporary name in {folder!r}")
