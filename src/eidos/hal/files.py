"""Local files as a plan reads them: the answer never drifts silently from what the plan was built on.

Every file of a parquet source holds the same columns, each as one type (in any order). The footers
are read when the Flow is built, and again before each run for any file that changed since (size,
modification time, inode): a file that no longer holds what the plan was built on stops the run
with the column, the file and both types, instead of an answer converted into the old types. A CSV
file's header is read again before each run; a value no lane can read as the type inferred from the
file's first block is reported alike by every lane (`csv_value_error`).

A source reads regular files only (a link to one is followed): a FIFO, a device, a socket or a file of
the kernel's /proc or /sys is a PlanError naming it, when the Flow is built and again before each run,
before anything opens it (reading one may block forever, never end, or show the process's secrets).
"""

from __future__ import annotations

import csv
import io
import os
import re
import stat
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence

from eidos.errors import EidosError, ExecutionError, PlanError
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.sources import CsvSource, FileSource, IpcSource, ParquetSource, PartSource, Source

CACHE_FILES = 8192
_footers: OrderedDict[str, tuple[tuple, object, Schema, frozenset[str]]] = OrderedDict()
_lock = threading.Lock()


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
PSEUDO = ("proc", "sys")   # the kernel's pseudo-filesystems: their files say they are regular


def regular_file(path: str) -> None:
    """A PlanError unless `path` is a regular file (a link is followed) outside /proc and /sys; a path that
    cannot be stat'ed is left to the caller's open, which names why."""
    if "://" in path:
        return   # an object store's (eidos.hal.stores)
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a file")
        raise PlanError(f"{path!r} is {kind}, not a regular file; eidos reads sources only from regular files "
                        "(a link to one is followed), since a pipe, device or socket may block or never end")
    real = os.path.realpath(path)
    top = real.split(os.sep)[1] if real.startswith(os.sep) else ""
    if top in PSEUDO:
        raise PlanError(f"{path!r} is {real!r}, a file of the kernel's /{top} pseudo-filesystem, not data on "
                        "disk; eidos reads sources only from regular files: copy what you need into a file")


def footer(path: str, storage: tuple = ()) -> tuple[object, Schema]:
    """(pyarrow FileMetaData, eidos Schema) of one parquet file; read again only when the file changed.
    Raises OSError, pyarrow's ArrowInvalid or PlanError (a type eidos lacks) for the caller to name."""
    return _footer(path, storage)[1:3]


def required(path: str, storage: tuple = ()) -> frozenset[str]:
    """The columns parquet file `path` declares required (holding no null), kept with its footer; raises
    as footer does."""
    return _footer(path, storage)[3]


def _footer(path: str, storage: tuple) -> tuple[tuple, object, Schema, frozenset[str]]:
    import pyarrow.parquet as pq

    from eidos.hal import stores

    if stores.is_remote(path):
        key = stores.info(path, storage)
        if key == (0, 0):   # http(s): read whole each time, never cached
            return _entry(key, pq.read_metadata(stores.open_input(path, storage)))
        opened = stores.open_input(path, storage)
    else:
        st = os.stat(path)
        key, opened = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev), path
    with _lock:
        hit = _footers.get(path)
    if hit is not None and hit[0] == key:
        return hit
    entry = _entry(key, pq.read_metadata(opened))
    with _lock:
        _footers[path] = entry
        _footers.move_to_end(path)
        while len(_footers) > CACHE_FILES:
            _footers.popitem(last=False)
    return entry


def _entry(key: tuple, meta) -> tuple[tuple, object, Schema, frozenset[str]]:
    arrow = meta.schema.to_arrow_schema()   # converted once a footer: it costs more than the rest of a lookup
    return key, meta, Schema.from_arrow(arrow), frozenset(f.name for f in arrow if not f.nullable)


def mismatch(expected: Schema, where: str, got: Schema, file: str) -> str | None:
    """How `file`'s columns differ from `expected` (those of `where`), in words; None when they agree."""
    for name, t in expected.items():
        if name not in got:
            return f"column {name!r} ({t}) of {where} is missing from {file!r}"
        if got[name] != t:
            return f"column {name!r} is {t} in {where} but {got[name]} in {file!r}"
    extra = [n for n in got.names if n not in expected]
    if extra:
        return f"{file!r} holds column {extra[0]!r} ({got[extra[0]]}), which {where} does not"
    return None


def parquet_footers(path: str, files: Sequence[str], storage: tuple = ()) -> tuple[Schema, list]:
    """The columns every file holds and each file's metadata, for read_parquet; a PlanError names the
    first file that differs from the first one, the column and both types."""
    import pyarrow as pa

    metas, first = [], None
    for f in files:
        try:
            meta, schema = footer(f, storage)
        except (OSError, pa.ArrowInvalid) as e:
            raise PlanError(f"cannot read parquet {path!r}: file {f!r}: {e}") from e
        except PlanError as e:
            raise PlanError(f"cannot read parquet {path!r}: file {f!r}: {e}") from e
        if first is None:
            first = schema
        else:
            differs = mismatch(first, repr(files[0]), schema, f)
            if differs:
                raise PlanError(f"cannot read parquet {path!r} as one table: {differs}; every file must hold the "
                                "same columns (in any order), each as one type: rewrite the files so, or read "
                                "them apart and union them after a cast")
        metas.append(meta)
    return first, metas


# ---------------------------------------------------------------- before each run

def check(plan: N.Node) -> None:
    """Every local file `plan` reads still holds what the plan was built on; a PlanError says what changed."""
    seen = set()
    for source in _sources(plan):
        if source in seen:
            continue
        seen.add(source)
        if isinstance(source, ParquetSource):
            _check_parquet(source)
        elif isinstance(source, FileSource):
            for f in source.paths:
                regular_file(f)
                if isinstance(source, CsvSource) and source.has_header:
                    _check_csv_header(source, f)
                elif isinstance(source, IpcSource):
                    _check_ipc(source, f)


def _sources(plan: N.Node) -> Iterator[Source]:
    for node in plan.walk():
        if isinstance(node, N.Scan):
            if isinstance(node.source, PartSource) and node.source.plan is not None:
                yield from _sources(node.source.plan)
            else:
                yield node.source


def _changed(source: Source, what: str) -> PlanError:
    return PlanError(f"{source.describe()} changed since the flow was built: {what}; build the flow again "
                     "to read the files as they are now")


def _check_parquet(source: ParquetSource) -> None:
    import pyarrow as pa

    expected = source.file_schema
    for f in source.files:
        regular_file(f)
        try:
            _, got = footer(f, source.storage)
        except FileNotFoundError as e:
            raise _changed(source, f"file {f!r} is gone") from e
        except (OSError, pa.ArrowInvalid, PlanError) as e:
            raise _changed(source, f"file {f!r} cannot be read: {e}") from e
        differs = mismatch(expected, "the flow as built", got, f)
        if differs:
            raise _changed(source, differs)


def csv_header(source: CsvSource, f: str) -> tuple[str, ...]:
    """The names in file `f`'s first non-empty row after its skipped rows, quoted as Arrow's reader reads them."""
    from eidos.hal.arrow import _open_binary, csv_dialect

    with _open_binary(source, f) as file:
        text = io.TextIOWrapper(file, encoding="utf-8-sig", errors="replace", newline="")
        for i, row in enumerate(csv.reader(text, **csv_dialect(source))):
            if row and i >= source.skip_rows:
                return tuple(row)
    return ()


def _check_csv_header(source: CsvSource, f: str) -> None:
    try:
        names = csv_header(source, f)
    except FileNotFoundError as e:
        raise _changed(source, "the file is gone" if len(source.paths) == 1 else f"file {f!r} is gone") from e
    except (OSError, csv.Error) as e:
        raise _changed(source, f"its header cannot be read: {e}") from e
    if names != source.schema.names:
        whose = "its header" if len(source.paths) == 1 else f"the header of {f!r}"
        raise _changed(source, f"{whose} is {', '.join(map(repr, names)) or '(empty)'}, the flow was built on "
                               f"{', '.join(map(repr, source.schema.names))}")


def _check_ipc(source: IpcSource, f: str) -> None:
    import pyarrow as pa

    from eidos.hal.arrow import _open

    try:
        with pa.ipc.open_file(_open(source, f)) as reader:
            got = Schema.from_arrow(reader.schema)
    except FileNotFoundError as e:
        raise _changed(source, f"file {f!r} is gone") from e
    except (OSError, pa.ArrowInvalid, PlanError) as e:
        raise _changed(source, f"file {f!r} cannot be read: {e}") from e
    differs = mismatch(source.schema, "the flow as built", got, f)
    if differs:
        raise _changed(source, differs)


# ---------------------------------------------------------------- CSV values

_ARROW_CSV = re.compile(r"In CSV column #(\d+): (?:Row #\d+: )?CSV conversion error to [^:]+: invalid value '(.*)'",
                        re.DOTALL)


def csv_value_error(source: CsvSource, column: str, value: str) -> ExecutionError:
    """The error every lane gives for a CSV value that is not of its column's inferred type."""
    expected = source.schema[column]
    return ExecutionError(
        f"cannot read {source.describe()}: column {column!r} holds {value!r}{_value_type(value)} past "
        f"{source.inferred}, from which eidos inferred {expected}; make the file's first rows show the type the "
        "column holds (e.g. 1.0 for a float), or convert it to parquet with the types you mean")


def arrow_csv_error(source: CsvSource, error: BaseException) -> EidosError | None:
    """csv_value_error for pyarrow's conversion error reading `source` (None for any other error)."""
    m = _ARROW_CSV.search(str(error))
    names = source.schema.names
    if m is None or int(m.group(1)) >= len(names):   # Arrow counts the file's columns from 0
        return None
    return csv_value_error(source, names[int(m.group(1))], m.group(2))


def _value_type(value: str) -> str:
    """' (a Float64)': the type Arrow's reader infers for the value alone, when eidos has it."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    from eidos.ir import dtypes as T

    try:
        t = pcsv.read_csv(io.BytesIO(b"v\n" + value.encode() + b"\n")).schema.field(0).type
        return f" (a {T.from_arrow(t, column='v')})"
    except (pa.ArrowException, EidosError):
        return ""
