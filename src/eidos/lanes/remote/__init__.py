"""The remote lane: a plan runs on an eidos execution service (eidos.remote) on another machine, on
that service's own lanes, and only its result comes back (docs/remote.md, "The remote lane")."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pyarrow as pa

from eidos.errors import BackendUnavailable, EidosError, UnsupportedError
from eidos.hal.lane import Availability, Lane
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.sources import LOCAL, RemoteSource, Source
from eidos.lanes.remote.coverage import COVERAGE

CONNECT = "ei.connect('eidos://host:port', token=...)"


class RemoteLane(Lane):
    """Runs a plan on the eidos service a connection is open to (execute.py ships it).

    The planner chooses it only for data that lives on a service (rule 2): a plan, or the largest
    subtree of one, over tables on one service runs there, and only the result moves. Named
    (`engine="remote"`, `address=` picking the connection) it runs the whole plan there, sending the
    plan's local data first. It is available only while a connection is open (`ei.connect`).
    """

    name = "remote"
    kind = "remote"
    coverage = COVERAGE
    names_failing_values = True   # the service's runner already puts a failure in the plan's terms

    def __init__(self, *, address: str | None = None, requested: bool = False):
        self.address = _normal(address) if address is not None else None
        self.requested = requested

    # ---- where it runs

    def is_available(self) -> Availability:
        if _open(self.address) is None:
            return Availability(False, self._no_connection())
        return Availability(True)

    def at(self, address: str) -> RemoteLane:
        return RemoteLane(address=address, requested=True)

    def named(self) -> RemoteLane:
        return self if self.requested else RemoteLane(address=self.address, requested=True)

    def connection(self, plan: N.Node):
        """The open connection `plan` runs on: the one to the service its tables live on, else the one
        `address=` names, else the latest opened."""
        addresses = {s.address for s in _remote_sources(plan)} | ({self.address} if self.address else set())
        if len(addresses) > 1:
            raise UnsupportedError(f"the plan reads tables on several eidos services ({', '.join(sorted(addresses))}); "
                                   "one plan runs on one service (without engine=, eidos runs each one's part there)")
        address = next(iter(addresses), None)
        remote = _open(address)
        if remote is None:
            raise BackendUnavailable(f"lane 'remote' is unavailable: {self._no_connection(address)}")
        return remote

    def _no_connection(self, address: str | None = None) -> str:
        address = address or self.address
        if address is None:
            return f"no eidos service is connected: call {CONNECT} first"
        return f"no connection to the eidos service at {address} is open: call ei.connect({address!r}, token=...) first"

    # ---- what it reads

    def can_read(self, source: Source) -> str | None:
        if isinstance(source, RemoteSource):
            if self.address is not None and source.address != self.address:
                return f"cannot read {source.describe()}: this run is on the service at {self.address}"
            if _open(source.address) is None:
                return f"cannot read {source.describe()}: {self._no_connection(source.address)}"
            return None
        if source.location != LOCAL:
            return f"cannot read {source.describe()}"
        if not self.requested:
            return (f"cannot read {source.describe()} unless named: local data goes to a service only on request "
                    "(engine='remote')")
        return None

    def supports(self, plan: N.Node) -> list[str]:
        gaps = self.coverage.gaps(plan)
        scans = [n for n in plan.walk() if isinstance(n, N.Scan)]
        if not self.requested and not any(isinstance(s.source, RemoteSource) for s in scans):
            return gaps + ["sources: none lives on an eidos service (engine='remote' runs the plan on one, "
                           "sending its data)"]
        gaps += dict.fromkeys(why for s in scans if (why := self.can_read(s.source)))
        addresses = sorted({s.address for s in _remote_sources(plan)})
        if len(addresses) > 1:
            gaps.append(f"sources on several eidos services ({', '.join(addresses)}): a plan runs on one")
        return gaps + _unnamed_functions(plan)

    # ---- running

    def execute(self, plan: N.Node) -> pa.Table:
        from eidos.lanes.remote import execute

        return execute.run(plan, self.connection(plan))

    def execute_stream(self, plan: N.Node) -> Iterator[pa.RecordBatch]:
        from eidos.lanes.remote import execute

        yield from execute.stream(plan, self.connection(plan))

    def describe(self, plan: N.Node) -> list[str]:
        """Where the plan runs and what moves: each input, how it gets there, and the result back."""
        from eidos.lanes.remote import execute

        addresses = {s.address for s in _remote_sources(plan)} | ({self.address} if self.address else set())
        remote = _open(next(iter(addresses))) if len(addresses) == 1 else _open(None)
        where = remote.address if remote is not None else (", ".join(sorted(addresses)) or "no service connected")
        lines = [f"remote: runs on the eidos service at {where}, on its own lanes; what moves:"]
        for move in execute.moves(plan):
            arrow = "stays there" if move.how == "in place" else "to the service"
            lines.append(f"  {arrow}: {move.describe()}")
        lines.append(f"  back: the result ({', '.join(plan.schema.names) or 'no columns'}) as Arrow")
        return lines

    def __repr__(self) -> str:
        return f"<lane remote (remote{', ' + self.address if self.address else ''})>"


def _normal(address: str) -> str:
    """'host:port' as 'eidos://host:port', the form a connection's address takes."""
    return address if "://" in address else "eidos://" + address


def _remote_sources(plan: N.Node) -> list[RemoteSource]:
    return [n.source for n in plan.walk() if isinstance(n, N.Scan) and isinstance(n.source, RemoteSource)]


def _open(address: str | None):
    """The open connection to `address` (the latest opened when None), or None; never imports the
    client when no connection was ever made (`import eidos` stays light)."""
    client = sys.modules.get("eidos.remote.client")
    if client is None:
        return None
    if address is None:
        return client.current()
    return next((r for r in reversed(client.connections()) if r.address == address), None)


def _unnamed_functions(plan: N.Node) -> list[str]:
    """The plan's Python functions that have no name a service could resolve (a lambda, a closure)."""
    from eidos.hal.trust import name_of

    gaps = []
    for node in plan.walk():
        fns = [node.fn] if isinstance(node, N.MapBatches) else []
        fns += [x.fn for e in node.expressions() for x in e.walk() if isinstance(x, E.Udf)]
        for fn in fns:
            try:
                name_of(fn, "function")
            except EidosError as e:
                gaps.append(f"a function the service can name: {e}")
    return gaps
