"""Helpers of the shared cross-lane suite: which lanes run here, and how a lane gets the suite's data.

A lane that cannot read in-memory Arrow sources (a database lane) joins by
adding a loader to LOADERS: a function that stores a pyarrow Table where the
lane reads and returns a Flow over it (e.g. write it into a SQLite file and
return `ei.read_sql("sqlite:///...", table=...)`). The `load_into` fixture
(conftest.py) then rebuilds a plan with those sources in place of the
in-memory ones.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Callable

import pyarrow as pa
import pytest

import eidos as ei
from eidos.errors import BackendUnavailable
from eidos.hal.lane import Backend
from eidos.ir import nodes as N

# lane name -> (tmp folder, table name, table) -> a Flow over the table where the lane reads it
LOADERS: dict[str, Callable[[object, str, pa.Table], ei.Flow]] = {
    lane: (lambda folder, name, table, _lane=lane: _databases().loader(_lane)(folder, name, table))
    for lane in ("sqlite", "postgresql")
}


def _databases():
    from eidos.testing import databases

    return databases


def holds(lane: str) -> set[str] | None:
    """The dtype kinds `lane`'s store holds exactly (None: no restriction, it reads Arrow)."""
    if lane not in LOADERS:
        return None
    return set(_databases().HOLDS[lane])


def lane_or_skip(name: str) -> Backend:
    """The registered lane `name` if it runs here when named (engine=name), else skip saying why."""
    from eidos.hal import registry

    infos = {b.name: b for b in ei.backends()}
    if name not in infos:
        pytest.skip(f"lane {name!r} is not registered here (lanes: {', '.join(sorted(infos))})")
    try:
        lane = registry.get(name)
    except BackendUnavailable as e:
        pytest.skip(str(e))
    available = lane.is_available_when_named()
    if not available:
        pytest.skip(f"lane {name!r} is unavailable: {available.reason}")
    return lane.named()     # the lane engine=name runs (a lane may read more when named)


def replace_scans(plan: N.Node, fn: Callable[[N.Scan], N.Node]) -> N.Node:
    """`plan` with every Scan replaced by `fn(scan)` (a plan of the same schema)."""
    if isinstance(plan, N.Scan):
        return fn(plan)
    changes = {}
    for f in dataclasses.fields(plan):
        v = getattr(plan, f.name)
        if isinstance(v, N.Node):
            changes[f.name] = replace_scans(v, fn)
        elif isinstance(v, tuple) and v and all(isinstance(x, N.Node) for x in v):
            changes[f.name] = tuple(replace_scans(x, fn) for x in v)
    return dataclasses.replace(plan, **changes) if changes else plan


def declaring(*functions: str) -> list[str]:
    """The registered lanes but the reference whose coverage declares each of `functions`: the lanes their
    cross-lane tests run on (one not available here skips there with the reason). A free lane that runs only a
    plan's Python functions (python_steps_only) is left out: it runs none of these itself."""
    from eidos.hal import registry

    return [lane.name for lane in registry.lanes()
            if lane.name != "reference" and not lane.python_steps_only and set(functions) <= lane.coverage.functions]


def triton_lane_setup() -> None:
    """Let the triton lane run here: without CUDA, under Triton's interpreter (set before triton is
    imported). EIDOS_TRITON_KERNELS set by hand wins (e.g. `reference`: the lane's programs on the ISA
    reference interpreter)."""
    if "EIDOS_TRITON_KERNELS" in os.environ or importlib.util.find_spec("torch") is None:
        return
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def run_or_skip(flow: ei.Flow, lane_name: str):
    """The flow's result on `lane_name`, forced; a skip when the lane is missing, lacks what the flow
    needs (naming the gaps), or finds at run time that it cannot run it."""
    from eidos.errors import UnsupportedError

    lane = lane_or_skip(lane_name)
    gaps = lane.supports(flow.plan)
    if gaps:
        pytest.skip(f"{lane_name} lacks {'; '.join(gaps)}")
    try:
        return flow.run(engine=lane_name, strict=True)
    except UnsupportedError as e:
        pytest.skip(f"{lane_name}: {e}")


def sqlite_table(folder, script: str, table: str = "t") -> ei.Flow:
    """A Flow over `table` of a SQLite file made in `folder` by `script` (the sqlite lane must be here)."""
    import sqlite3

    lane_or_skip("sqlite")
    path = folder / "data.db"
    with sqlite3.connect(path) as con:
        con.executescript(script)
    con.close()
    return ei.read_sql(f"sqlite:///{path}", table=table)


def agrees_with_reference(lane_name: str, flow: ei.Flow, load_into, ordered: bool) -> None:
    """The flow's result on `lane_name` (its data stored where the lane reads) equals the reference
    lane's; a skip naming why when the data cannot be stored there or the lane lacks what the flow needs."""
    from eidos.errors import PlanError, UnsupportedError
    from eidos.testing.compare import assert_tables_equal

    lane = lane_or_skip(lane_name)
    try:
        there = load_into(lane, flow)
    except UnsupportedError as e:
        pytest.skip(f"the data cannot be stored where lane {lane_name!r} reads: {e}")
    except PlanError as e:   # the plan reads a row order that a database table does not have
        pytest.skip(f"the plan is not defined over the tables lane {lane_name!r} reads: {e}")
    gaps = lane.supports(there.plan)
    if gaps:
        pytest.skip(f"lane {lane_name!r} lacks {', '.join(gaps)}")
    try:
        got = there.run(engine=lane_name, strict=True)
    except UnsupportedError as e:
        pytest.skip(f"lane {lane_name!r} cannot run it: {e}")
    assert_tables_equal(got, flow.run(engine="reference"), ordered=ordered, float_rel=1e-9)
