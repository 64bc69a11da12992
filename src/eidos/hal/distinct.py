"""How many groups a keyed aggregation makes: the distinct count of its keys, estimated from the source.

For keys that are columns of one source (renamed, filtered, sorted or limited on the way up):

- bounds from parquet statistics, read from the footers only: at most the rows; at most the product over
  integer keys of (max - min + 1) over the union of the row groups' ranges (plus one when nulls are
  counted), or of `distinct_count` summed over row groups where the writer recorded it; at least the
  number of different row group minima and maxima (each is a value in the data);
- within them, GEE (Charikar, Chaudhuri, Motwani, Narasayya, PODS 2000) on a sample of up to SAMPLE rows of
  the key columns (parquet: whole row groups spread over the files; in-memory Arrow: rows spread evenly):
  D = sqrt(N / n) f1 + (d - f1), with d the distinct key tuples of the n sampled rows, f1 those seen once,
  N the source's rows. Its ratio error is at most sqrt(N / n) whatever the data, and exact once the sample
  holds every row or every value more than once (16 groups in 10M rows: 16); a sample with no value seen
  twice is taken as a unique key (N), as PostgreSQL's ANALYZE takes it;
- a single key whose row groups' ranges do not overlap, though they may touch (sorted or clustered data, where
  a few row groups are no sample of the rest): the distinct values in the row groups read, times all the rows
  over the rows read.

An estimate is kept per parquet file set (path, size, modification time of each file) and per in-memory
table, so a plan pays the sample once (a few ms for 100,000 rows). Keys that are not plain columns of one
source give None: the row flow's groups_per_row guess stands.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict

from eidos.hal.memo import once
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.rewrite import right_output_names
from eidos.ir.sources import ArrowSource, ParquetSource, Source

SAMPLE = 100_000
_cache: OrderedDict[tuple, float | None] = OrderedDict()
_lock = threading.Lock()


def groups(node: N.Aggregate, share: float = 1.0) -> float | None:
    """Estimated groups of `node`, or None when its keys are not columns of one source. `share`: the share of
    the rows below that reach `node` (what filters and joins keep, at most 1); rows kept at random from a
    source of N rows and D key tuples hold D (1 - (1 - share)^(N / D)) of them (Cardenas, CACM 1975)."""
    names = [e.name if isinstance(e, E.Column) else None for _, e in node.keys]
    found = origin(node.input, names)
    if found is None:
        return None
    scan, columns = found
    d = distinct(scan.source, tuple(dict.fromkeys(columns)))   # a key read twice (a=A, A) counts once
    rows = scan.source.estimated_rows
    if d is None or share >= 1.0 or not rows:
        return d
    return d * -math.expm1(rows / d * math.log1p(-max(share, 0.0))) if share > 0 else 0.0


def origin(node: N.Node, names: list[str | None]) -> tuple[N.Scan, list[str]] | None:
    """The scan the columns `names` are read from, with their names there; None if any is computed or they
    come from both sides of a join."""
    _, scan, names = trace(node, names)
    return None if scan is None else (scan, names)


def trace(node: N.Node, names: list[str | None]) -> tuple[list[tuple[N.Node, int | None]], N.Scan | None, list]:
    """The way down from `node` that the columns `names` take unchanged (renamed, filtered, sorted, limited,
    joined, grouped by): each node passed, with the input they come from where it has two; then the scan they
    are read from, or None where one is computed there or they come from both sides of a join."""
    passed: list[tuple[N.Node, int | None]] = []
    while None not in names:   # names given as None: computed where they are asked for
        if isinstance(node, N.Scan):
            return passed, node, names
        side = None
        if isinstance(node, (N.Filter, N.Sort, N.Limit, N.Distinct)):
            below = names
        elif isinstance(node, (N.Project, N.Aggregate)):
            exprs = dict(node.columns if isinstance(node, N.Project) else node.keys)
            below = [e.name if isinstance(e := exprs.get(n), E.Column) else None for n in names]
        elif isinstance(node, N.Join) and node.how != "cross":
            side = 0 if all(n in node.left.schema.names for n in names) else 1
            below = names if side == 0 else [right_output_names(node).get(n) for n in names]
        else:
            break
        if None in below:
            break
        passed.append((node, side))
        node, names = node.inputs[side or 0], below
    return passed, None, names


def distinct(source: Source, columns: tuple[str, ...]) -> float | None:
    """Estimated distinct tuples of `columns` in `source` (parquet or in-memory Arrow), else None."""
    if isinstance(source, ArrowSource):
        return once(source, f"distinct {columns}", lambda: _arrow(source.table, columns))
    if not isinstance(source, ParquetSource) or not source.files or set(columns) & set(source.partitions):
        return None
    try:
        key = (columns, *((f, st.st_size, st.st_mtime_ns) for f in source.files for st in [os.stat(f)]))
    except OSError:
        return None
    with _lock:
        if key in _cache:
            return _cache[key]
    value = _parquet(source.files, columns)
    with _lock:
        _cache[key] = value
        while len(_cache) > 1024:
            _cache.popitem(last=False)
    return value


def gee(sample, columns, rows: int) -> tuple[float, int]:
    """(GEE's estimate of distinct tuples among `rows` rows, d) from a pyarrow Table `sample` of them."""
    counts = _counts(sample, columns)
    d, f1 = len(counts), int((counts == 1).sum())
    n = sample.num_rows
    if n >= rows or f1 == n:   # every row seen, or no value seen twice: the key looks unique (as ANALYZE takes it)
        return float(d if n >= rows else rows), d
    return math.sqrt(rows / n) * f1 + (d - f1), d


def _counts(sample, columns):
    """How many times each distinct key tuple occurs in `sample` (a NumPy array). No pandas: pyarrow's
    to_numpy and group_by import it (0.4 s, once per process, on a plan's first estimate)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    column = sample.column(columns[0])
    if len(columns) == 1 and (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        values = as_numpy(column.drop_null())   # sorting, not hashing: Arrow's hash of some doubles is slow
        counts = np.unique(values, return_counts=True)[1]
        return np.append(counts, column.null_count) if column.null_count else counts
    key = np.zeros(sample.num_rows, np.int64)
    for c in columns:   # each column's dictionary codes (null one more code), folded into one dense key
        coded = pc.dictionary_encode(sample.column(c).combine_chunks(), null_encoding="encode")
        key = np.unique(key * len(coded.dictionary) + as_numpy(coded.indices), return_inverse=True)[1].ravel()
    return np.bincount(key)


def as_numpy(values):
    """Integers or floats without nulls (a pyarrow Array or ChunkedArray) as a NumPy array, read from the buffer."""
    import numpy as np
    import pyarrow as pa

    a = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    kind = "f" if pa.types.is_floating(a.type) else "u" if pa.types.is_unsigned_integer(a.type) else "i"
    dtype = np.dtype(f"{kind}{a.type.bit_width // 8}")
    if len(a) == 0:
        return np.empty(0, dtype)
    return np.frombuffer(a.buffers()[1], dtype=dtype, count=len(a), offset=a.offset * dtype.itemsize)


def spread(rows: int, n: int):
    """`n` row numbers spread evenly over `rows` rows, as a pyarrow Array (for take: no pandas)."""
    import numpy as np
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(np.linspace(0, rows - 1, n).astype(np.int64))])


def _arrow(table, columns: tuple[str, ...]) -> float:
    rows = table.num_rows
    sample = table.select(list(columns))
    if rows > SAMPLE:
        sample = sample.take(spread(rows, SAMPLE))
    estimate, d = gee(sample, columns, rows)
    return max(1.0, d, min(float(rows), estimate))


def _parquet(files: tuple[str, ...], columns: tuple[str, ...]) -> float | None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from eidos.hal.files import footer

    if any("://" in f for f in files):
        return None   # an object store's files: no sampling over the network for an estimate
    try:
        metas = [footer(f)[0] for f in files]
        groups = [(f, m, i) for f, m in zip(files, metas) for i in range(m.num_row_groups)]
        rows = sum(m.num_rows for m in metas)
        if rows == 0:
            return 1.0
        low, high, apart = _bounds(files, columns, rows)
        k = min(len(groups), math.ceil(SAMPLE * len(groups) / rows))
        picked = [groups[j] for j in sorted({round(x) for x in np.linspace(0, len(groups) - 1, k)})]
        sample = pa.concat_tables([pq.ParquetFile(f).read_row_group(i, columns=list(columns)) for f, _, i in picked])
    except (OSError, pa.ArrowException, KeyError, ValueError):
        return None
    if apart:   # sorted or clustered: row groups share no values, so each holds about as many as those read
        return max(1.0, low, min(high, len(_counts(sample, columns)) * rows / sample.num_rows))
    if sample.num_rows > SAMPLE:   # evenly spread rows of the groups read
        sample = sample.take(spread(sample.num_rows, SAMPLE))
    estimate, d = gee(sample, columns, rows)
    return max(1.0, d, low, min(estimate, high))


def _bounds(files: tuple[str, ...], columns: tuple[str, ...], rows: int) -> tuple[float, float, bool]:
    """(at least, at most) distinct tuples from the row groups' statistics (the module's docstring), and
    whether the row groups' ranges of a single key are apart (sorted or clustered data)."""
    high, low, apart = float(rows), 1.0, False
    product, known = 1.0, True
    for c in columns:
        stats = statistics(files, c)
        if stats is None:
            known = False
            continue
        low = max(low, len({s.min for s in stats} | {s.max for s in stats}))
        ranges = sorted((s.min, s.max) for s in stats)
        apart = len(columns) == 1 and len(ranges) > 1 and all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:]))
        nulls = any(s.null_count for s in stats)
        if all(s.has_distinct_count for s in stats):
            product *= sum(s.distinct_count for s in stats) + nulls
        elif all(isinstance(s.min, int) and not isinstance(s.min, bool) for s in stats):
            product *= _width(ranges) + nulls
        else:
            known = False
    return low, min(high, product) if known else high, apart


def statistics(files: tuple[str, ...], name: str) -> list | None:
    """The statistics of column `name` in each row group of the local parquet `files` (from their footers),
    or None where a row group has no min and max. Raises OSError, pyarrow's ArrowException or ValueError (no
    such column) for the caller: this module's estimates and eidos.hal.selectivity's ranges read them here."""
    from eidos.hal.files import footer

    out = []
    for f in files:
        meta = footer(f)[0]
        j = [meta.schema.column(k).name for k in range(meta.num_columns)].index(name)
        for i in range(meta.num_row_groups):
            s = meta.row_group(i).column(j).statistics
            if s is None or not s.has_min_max:
                return None
            out.append(s)
    return out


def _width(ranges: list[tuple[int, int]]) -> int:
    """Integers in the union of the closed ranges (sorted by start)."""
    total, (lo, hi) = 0, ranges[0]
    for a, b in ranges[1:]:
        if a > hi + 1:
            total, lo, hi = total + hi - lo + 1, a, b
        else:
            hi = max(hi, b)
    return total + hi - lo + 1
