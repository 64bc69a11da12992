"""An ordered list of named, typed columns: what a plan node produces."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from eidos.errors import PlanError, did_you_mean, shown
from eidos.ir import dtypes
from eidos.ir.dtypes import DType


class Schema:
    """Column names and dtypes in order; names are unique. `unread` names a source's columns of types
    eidos does not read, with why: they are left out, and naming one is a PlanError that says so."""

    __slots__ = ("_fields", "_index", "_unread")

    def __init__(self, fields: Iterable[tuple[str, DType]], unread: dict[str, str] | None = None):
        self._fields = tuple(fields)
        self._unread = dict(unread or {})
        self._index = {name: i for i, (name, _) in enumerate(self._fields)}
        if len(self._index) != len(self._fields):
            dup = sorted({n for n, _ in self._fields if list(self.names).count(n) > 1})
            raise PlanError(f"duplicate column names {', '.join(map(repr, dup))}; "
                            "rename them (alias/rename) so each name is unique")

    @classmethod
    def read(cls, columns: Iterable[tuple[str, object]], typer) -> Schema:
        """A source's schema from (name, engine type) pairs, each typed by `typer(engine type, name)`; a
        column it refuses (a PlanError) is left unread, so only a plan that names it fails."""
        fields, unread = [], {}
        for name, raw in columns:
            try:
                fields.append((name, typer(raw, name)))
            except PlanError as e:
                unread[name] = str(e)
        if unread and not fields:  # no column is read: why, for the first
            raise PlanError(next(iter(unread.values())))
        return cls(fields, unread)

    @classmethod
    def from_arrow(cls, schema: pa.Schema) -> Schema:
        return cls((f.name, dtypes.from_arrow(f.type, column=f.name)) for f in schema)

    def to_arrow(self) -> pa.Schema:
        return pa.schema([pa.field(n, t.to_arrow()) for n, t in self._fields])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self._fields)

    @property
    def dtypes(self) -> tuple[DType, ...]:
        return tuple(t for _, t in self._fields)

    def items(self) -> tuple[tuple[str, DType], ...]:
        return self._fields

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self._fields)

    def __getitem__(self, name: str) -> DType:
        return self.dtype(name)

    def dtype(self, name: str, *, where: str = "") -> DType:
        """The dtype of `name`; a PlanError that lists the columns and suggests one when missing."""
        try:
            return self._fields[self._index[name]][1]
        except KeyError:
            raise self.missing(name, where) from None

    def missing(self, name: str, where: str = "") -> PlanError:
        place = f" in {where}" if where else ""
        if name in self._unread:
            return PlanError(f"{self._unread[name]}{place}")
        hint = did_you_mean(name, self.names)
        names = ", ".join(map(repr, self.names)) if self._fields else "(none)"
        lines = [f"column {name!r} does not exist{place}", f"  columns: {names}"]
        if hint:
            lines.append(f"  {hint}")
        return PlanError("\n".join(lines))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self._fields == other._fields

    def __hash__(self) -> int:
        return hash(self._fields)

    def text(self) -> str:
        """'a: Int64, b: String' for messages, each name as errors.shown shows it; '(no columns)' when empty."""
        return ", ".join(f"{shown(n)}: {t}" for n, t in self._fields) or "(no columns)"

    def __repr__(self) -> str:
        return f"Schema({self.text() if self._fields else ''})"
