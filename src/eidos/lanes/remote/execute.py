"""Running a plan on an eidos service (eidos.remote): its local inputs go there first, the plan runs
on the service's own lanes, and the result comes back as Arrow.

A local input (in-memory Arrow, a file, another part's result) is read here as the columns the plan
uses. Up to EMBED_BYTES it is embedded in the plan's JSON (one call fewer); a larger one is uploaded
as an Arrow IPC stream (`put_table`) and named by its handle, because base64 in JSON costs 4/3 of
the bytes and the service caps the size of a control message. Tables already on the service are read
there in place. Uploads are released when the run ends, whatever its outcome.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from eidos.errors import ExecutionError
from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.sources import LOCAL, ArrowSource, RemoteSource

EMBED_BYTES = 64 << 10


@dataclass(frozen=True)
class Move:
    """One input of the plan and how it reaches the service: "embedded", "uploaded" or "in place"."""

    scan: N.Scan
    how: str

    def describe(self) -> str:
        what = self.scan.source.describe()
        if self.scan.columns is not None and self.scan.columns != tuple(self.scan.source.schema.names):
            what += f", columns {', '.join(self.scan.columns)}"
        if self.how == "in place":
            return f"{what}: read there in place"
        read = "" if isinstance(self.scan.source, ArrowSource) else "read here, "
        size = _size(self.scan)
        if self.how == "embedded":
            return f"{what}: {read}embedded in the plan ({_mib(size)}, under {EMBED_BYTES >> 10} KiB)"
        return f"{what}: {read}uploaded as an Arrow table" + ("" if size is None else f" ({_mib(size)})")


def moves(plan: N.Node) -> list[Move]:
    """How each input of `plan` reaches the service, once each, in plan order."""
    found: dict[N.Scan, Move] = {}
    for node in plan.walk():
        if isinstance(node, N.Scan) and node not in found:
            found[node] = Move(node, _how(node))
    return list(found.values())


def _how(scan: N.Scan) -> str:
    if isinstance(scan.source, RemoteSource):
        return "in place"
    size = _size(scan)
    return "embedded" if size is not None and size <= EMBED_BYTES else "uploaded"


def _size(scan: N.Scan) -> int | None:
    """Bytes of the columns `scan` reads, when known before reading (in-memory data; a file's estimate)."""
    if isinstance(scan.source, ArrowSource):
        return _local(scan).nbytes
    return scan.source.estimated_bytes


def _mib(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def _local(scan: N.Scan) -> pa.Table:
    """The columns `scan` reads of a local source, as Arrow: in-memory data sliced without a copy,
    anything else read here by the lane the planner picks for it (in a copy of the context, so the
    caller's ei.last_run() stays the record of the caller's run)."""
    source = scan.source
    if isinstance(source, ArrowSource):
        return source.table if scan.columns is None else source.table.select(list(scan.columns))
    return contextvars.copy_context().run(_read_here, scan)


def _read_here(scan: N.Scan) -> pa.Table:
    from eidos.hal.planner import without
    from eidos.hal.runner import run

    with without("remote"):
        return run(scan)


def ship(plan: N.Node, remote) -> tuple[N.Node, list]:
    """`plan` as the service reads it, and the handles of the tables uploaded for it (the caller
    releases them): each local Scan becomes a Scan of embedded data or of an uploaded table."""
    uploaded: list = []
    done: dict[N.Scan, N.Node] = {}

    def visit(node: N.Node) -> N.Node:
        if not isinstance(node, N.Scan):
            return map_inputs(node, visit)
        if node.source.location != LOCAL:
            return node
        if node not in done:
            table = _local(node)
            schema = node.schema
            if table.nbytes <= EMBED_BYTES:
                done[node] = N.Scan(ArrowSource.of(table, schema, kind="embedded"))
            else:
                handle = remote.put_table(table)
                uploaded.append(handle)
                done[node] = N.Scan(RemoteSource(schema, address=remote.address, handle=handle.id,
                                                 rows=table.num_rows))
        return done[node]

    try:
        return visit(plan), uploaded
    except BaseException as e:
        _release(remote, uploaded, e)
        raise


def run(plan: N.Node, remote, *, timeout: float | None = None) -> pa.Table:
    """`plan`'s result, run on the service `remote` is connected to."""
    batches = list(stream(plan, remote, timeout=timeout))
    return pa.Table.from_batches(batches, plan.schema.to_arrow())


def stream(plan: N.Node, remote, *, timeout: float | None = None) -> Iterator[pa.RecordBatch]:
    """The result's batches; the work is cancelled on the service if this process is interrupted."""
    from eidos.hal.trust import name_of
    from eidos.ir.serialize import dumps

    shipped, uploaded = ship(plan, remote)
    held = list(uploaded)
    try:
        plan_id = uuid.uuid4().hex
        fragment = {"kind": "plan", "id": plan_id, "plan": dumps(shipped, name=name_of)}
        try:
            results = remote.run_subgraph(fragment, timeout=timeout)
        except KeyboardInterrupt:
            remote.cancel(plan_id)
            raise
        held += results
        if len(results) != 1:
            raise ExecutionError(f"the eidos service at {remote.address} answered a plan with {len(results)} "
                                 "results; a plan has one")
        fetch = getattr(remote, "fetch_stream", None)
        if fetch is None:
            yield from remote.fetch_result(results[0]).to_batches()
        else:
            yield from fetch(results[0])
    except BaseException as e:
        _release(remote, held, e)
        raise
    _release(remote, held)


def _release(remote, handles: list, failed: BaseException | None = None) -> None:
    """Release `handles` on the service. When the run `failed`, a failure to release is noted on that
    error rather than raised in its place (the service frees a session's handles when it ends)."""
    if not handles:
        return
    if failed is None:
        remote.release(*handles)
        return
    try:
        remote.release(*handles)
    except Exception as e:  # noqa: BLE001 - noted on the error that ended the run, which is raised
        failed.add_note(f"(releasing {len(handles)} handle(s) on {remote.address} also failed: "
                        f"{type(e).__name__}: {e})")
