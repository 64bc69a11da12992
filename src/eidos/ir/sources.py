"""Where a plan's data comes from: descriptors only; reading is a lane's job.

A source carries its schema (known when the Flow is built) and what the
planner needs to place it: where it lives and how big it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import pyarrow as pa

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
class ParquetSource(Source):
    path: str = ""                       # as the user wrote it: a file, folder or glob
    files: tuple[str, ...] = ()          # what it matched when the Flow was built
    rows: int | None = field(default=None, compare=False)
    nbytes: int | None = field(default=None, compare=False)

    @property
    def estimated_rows(self) -> int | None:
        return self.rows

    @property
    def estimated_bytes(self) -> int | None:
        return self.nbytes

    def describe(self) -> str:
        return f"parquet {self.path!r} ({len(self.files)} file{'s' if len(self.files) != 1 else ''})"


@dataclass(frozen=True)
class CsvSource(Source):
    path: str = ""
    has_header: bool = True
    delimiter: str = ","
    nbytes: int | None = field(default=None, compare=False)

    @property
    def estimated_bytes(self) -> int | None:
        return self.nbytes

    def describe(self) -> str:
        return f"csv {self.path!r}"


@dataclass(frozen=True)
class ArrowSource(Source):
    """In-memory Arrow data. Identity is `token`; the table itself is not compared."""

    token: str = ""
    table: pa.Table | None = field(default=None, compare=False, repr=False)

    @property
    def estimated_rows(self) -> int | None:
        return self.table.num_rows

    @property
    def estimated_bytes(self) -> int | None:
        return self.table.nbytes

    def describe(self) -> str:
        return f"arrow table {self.token} ({self.table.num_rows} rows)"


@dataclass(frozen=True)
class SqlSource(Source):
    """A table or query in a database; the uri may hold a password, so only `safe_uri` is shown."""

    uri: str = field(default="", repr=False)
    table: str | None = None
    query: str | None = None
    rows: int | None = field(default=None, compare=False)

    @property
    def scheme(self) -> str:
        return self.uri.split(":", 1)[0].lower()

    @cached_property
    def safe_uri(self) -> str:
        """Redacted once per source: the planner asks where each source lives many times a plan."""
        return redact(self.uri)

    @property
    def location(self) -> str:
        return self.safe_uri

    @property
    def estimated_rows(self) -> int | None:
        return self.rows

    def describe(self) -> str:
        what = f"table {self.table!r}" if self.table is not None else f"query {self.query!r}"
        return f"{self.scheme} {what} at {self.safe_uri}"

    def __repr__(self) -> str:
        return f"SqlSource({self.describe()})"


_PASSWORD = re.compile(r"(//[^/:@]*:)([^@/]*)@")
_PASSWORD_PARAM = re.compile(r"(password=)([^&\s]*)", re.IGNORECASE)


def redact(uri: str) -> str:
    """The uri with any password replaced by '***': safe for messages and logs."""
    return _PASSWORD_PARAM.sub(r"\1***", _PASSWORD.sub(r"\1***@", uri))


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
