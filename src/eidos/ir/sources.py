"""Where a plan's data comes from: descriptors only; reading is a lane's job.

A source carries its schema (known when the Flow is built) and what the
planner needs to place it: where it lives and how big it is.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from dataclasses import dataclass, field
from functools import cached_property

import pyarrow as pa

from eidos.errors import PlanError, shown
from eidos.ir import uri as uri_mod
from eidos.ir.schema import Schema

LOCAL = "local"


@dataclass(frozen=True)
class Source:
    """Base of every source. `location` is 'local' or the database it lives in."""

    schema: Schema

    @property
    def location(self) -> str:
        return LOCAL

    @property
    def estimated_rows(self) -> int | None:
        return None

    @property
    def estimated_bytes(self) -> int | None:
        return None

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class FileSource(Source):
    """Files: `path` as the user wrote it (a file, folder, glob or object-store URL), `files` what it matched
    when the Flow was built, in path order. `storage` holds the object store's options (`storage_options`:
    keys, a region, an endpoint), never shown or stored: a plan's JSON, explain() and repr leave them out."""

    path: str = ""
    files: tuple[str, ...] = ()
    nbytes: int | None = field(default=None, compare=False)
    storage: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    kind = "file"

    @property
    def paths(self) -> tuple[str, ...]:
        return self.files or (self.path,)

    @property
    def estimated_bytes(self) -> int | None:
        return self.nbytes

    def describe(self) -> str:
        n = len(self.paths)
        return f"{self.kind} {self.path!r}" + (f" ({n} files)" if n != 1 else "")


@dataclass(frozen=True)
class ParquetSource(FileSource):
    """Parquet files. Hive-style folders (key=value) give `partitions`, the last columns of the schema,
    and `values`: per file, the text of each key's value in its path (None for null)."""

    rows: int | None = field(default=None, compare=False)
    partitions: tuple[str, ...] = ()
    values: tuple[tuple[str | None, ...], ...] = ()
    kind = "parquet"

    @property
    def estimated_rows(self) -> int | None:
        return self.rows

    @property
    def file_schema(self) -> Schema:
        """The columns the files hold (the schema without the partition columns)."""
        return Schema(f for f in self.schema.items() if f[0] not in self.partitions)

    def partition_row(self, i: int) -> tuple:
        """The partition values of file `i` as Python values of the partition columns' types."""
        return tuple(partition_value(v, self.schema[k]) for k, v in zip(self.partitions, self.values[i]))

    def describe(self) -> str:
        by = f", partitioned by {', '.join(map(shown, self.partitions))}" if self.partitions else ""
        return f"parquet {self.path!r} ({len(self.files)} file{'s' if len(self.files) != 1 else ''}{by})"


def partition_value(text: str | None, dtype):
    """A partition value's text (as in key=value) as a value of `dtype`: Int64, Float64, Date or String."""
    if text is None:
        return None
    if dtype.name in ("Int64", "Float64"):
        return int(text) if dtype.name == "Int64" else float(text)
    return _dt.date.fromisoformat(text) if dtype.name == "Date" else text


@dataclass(frozen=True)
class CsvSource(FileSource):
    """CSV files, each read after its first `skip_rows` rows, with a header line unless not `has_header`;
    a field equal to one of `null_values` is null; `quote_char` None reads quotes as text."""

    has_header: bool = True
    delimiter: str = ","
    null_values: tuple[str, ...] = ("",)
    skip_rows: int = 0
    quote_char: str | None = '"'
    inferred: str = field(default="the first block (1 MiB)", compare=False, repr=False)   # for messages
    kind = "csv"


@dataclass(frozen=True)
class NdjsonSource(FileSource):
    """Newline-delimited JSON files: one object per line, its keys the columns."""

    kind = "ndjson"


@dataclass(frozen=True)
class IpcSource(FileSource):
    """Arrow IPC files (Feather v2), read as they are, cast to the schema's types."""

    rows: int | None = field(default=None, compare=False)
    kind = "ipc"

    @property
    def estimated_rows(self) -> int | None:
        return self.rows


def _label(kind: str = "arrow") -> str:
    return f"{kind}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True, eq=False)
class ArrowSource(Source):
    """In-memory Arrow data. Its identity is the data itself, never a name a plan could carry: two
    sources are one when they hold the same table object, or tables of one schema and equal
    content (`fingerprint`, computed only when two different table objects of one schema and
    length meet). `label` names it in explain() and messages, and nothing else.

    Make one with `ArrowSource.of`, which gives the table the exact Arrow types of its schema.
    """

    table: pa.Table | None = field(default=None, repr=False)
    label: str = field(default_factory=_label)

    @classmethod
    def of(cls, table: pa.Table, schema: Schema | None = None, *, kind: str = "arrow") -> ArrowSource:
        """A source over `table`. Without `schema` its types are read from the table (and the table
        cast to them); with one (a plan file's, a part's), the table must already hold exactly it."""
        if schema is not None:
            if table.schema != schema.to_arrow():
                raise PlanError(f"the in-memory data does not match its schema {schema}: it holds "
                                f"{', '.join(f'{shown(f.name)}: {f.type}' for f in table.schema) or 'no columns'}")
            return cls(schema, table=table, label=_label(kind))
        for f in table.schema:
            if pa.types.is_null(f.type):
                raise PlanError(f"column {f.name!r} holds only nulls, so its type is unknown; "
                                "give it a type (e.g. pa.table(data, schema=...))")
        schema = Schema.from_arrow(table.schema)
        target = schema.to_arrow()
        if table.schema != target:
            try:
                table = table.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise PlanError(f"cannot convert the Arrow data to eidos types {schema}: {e}") from e
        return cls(schema, table=table, label=_label(kind))

    @cached_property
    def fingerprint(self) -> bytes:
        """blake3 of the table's Arrow IPC stream: equal for equal schemas, chunk lengths and values
        (bit for bit: -0.0 is not 0.0). About 0.5 s a GB, so only computed when asked."""
        import blake3

        sink = _Digest(blake3.blake3(max_threads=blake3.blake3.AUTO))
        with pa.ipc.new_stream(sink, self.table.schema) as writer:
            writer.write_table(self.table)
        return sink.digest.digest()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrowSource):
            return NotImplemented
        if self.table is other.table:
            return self.schema == other.schema
        return (self.schema == other.schema and self.table.num_rows == other.table.num_rows
                and self.fingerprint == other.fingerprint)

    def __hash__(self) -> int:
        return hash((ArrowSource, self.schema, self.table.num_rows))

    @property
    def estimated_rows(self) -> int | None:
        return self.table.num_rows

    @property
    def estimated_bytes(self) -> int | None:
        return self.table.nbytes

    def describe(self) -> str:
        return f"arrow table {self.label} ({self.table.num_rows} rows)"


class _Digest:
    """A write-only file for pyarrow's IPC writer that hashes what it is given instead of keeping it."""

    closed = False

    def __init__(self, digest):
        self.digest = digest

    def write(self, data) -> int:
        self.digest.update(data)
        return memoryview(data).nbytes

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@dataclass(frozen=True)
class SqlSource(Source):
    """A table or query in a database. A password in the uri given is split from it when the source
    is made (eidos.ir.uri): `uri` holds none, so whatever shows or stores it (explain, repr, a plan's
    JSON, messages) cannot leak one; `connection_uri()` puts it back for the driver alone."""

    uri: str = ""
    table: str | None = None
    query: str | None = None
    rows: int | None = field(default=None, compare=False)
    secrets: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.uri, str):
            public, found = uri_mod.split(self.uri)
            if found:
                object.__setattr__(self, "uri", public)
                object.__setattr__(self, "secrets", tuple(self.secrets) + found)

    def connection_uri(self) -> str:
        """The uri with its password: for a database driver, never for a message."""
        return uri_mod.join(self.uri, self.secrets)

    @property
    def scheme(self) -> str:
        return self.uri.split(":", 1)[0].lower()

    @property
    def location(self) -> str:
        return self.uri

    @property
    def estimated_rows(self) -> int | None:
        return self.rows

    def describe(self) -> str:
        what = f"table {self.table!r}" if self.table is not None else f"query {self.query!r}"
        return f"{self.scheme} {what} at {shown(self.uri)}"

    def __repr__(self) -> str:
        return f"SqlSource({self.describe()})"


@dataclass(frozen=True)
class RemoteSource(Source):
    """A table an eidos execution service keeps (eidos.remote), named by the service's `handle` for it:
    the data stays there, so a plan over it runs there (rule 2) and only the result moves. `address`
    is the service's ("eidos://host:port"); the handle means something only in the session that made it."""

    address: str = ""
    handle: int = 0
    rows: int | None = field(default=None, compare=False)

    @property
    def location(self) -> str:
        return "remote:" + self.address

    @property
    def estimated_rows(self) -> int | None:
        return self.rows

    def describe(self) -> str:
        rows = "" if self.rows is None else f" ({self.rows} rows)"
        return f"table {self.handle} on the eidos service at {self.address}{rows}"


@dataclass(frozen=True)
class PartSource(Source):
    """The result of another part of a split plan, named by its key: the part that reads it knows
    neither where that part ran nor where its result lives. `plan` is the subplan that computes it
    (for size estimates and explain); the runner replaces this source by the one the part's result
    handle gives before the reading part runs.
    """

    key: str = ""
    plan: object = field(default=None, compare=False, repr=False)   # an eidos.ir.nodes.Node

    def describe(self) -> str:
        return f"result of part {self.key}"
