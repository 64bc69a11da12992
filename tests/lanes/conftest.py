"""Fixtures of the shared cross-lane suite; see helpers.py for how a lane that cannot read Arrow joins.

The suite runs on every lane the registry (eidos.hal.registry) finds: the built-in ones and any
installed through the `eidos.backends` entry points; one that cannot run here skips with the reason.
"""

from __future__ import annotations

import pytest

import eidos as ei
from eidos.hal import registry
from eidos.hal.lane import Backend
from eidos.ir import nodes as N
from eidos.ir.sources import ArrowSource
from tests.lanes.helpers import LOADERS, replace_scans, triton_lane_setup

triton_lane_setup()

# the reference lane (the oracle) first
LANES = sorted((lane.name for lane in registry.lanes()), key=lambda name: name != "reference")


@pytest.fixture(scope="session")
def load_into(tmp_path_factory):
    """load_into(lane, flow) -> the flow with its in-memory sources stored where `lane` reads them.

    Without a loader for the lane the flow is returned unchanged (the lane reads Arrow itself,
    or `lane.supports` names the source it cannot read and the test skips).
    """

    def load(lane: Backend, flow: ei.Flow) -> ei.Flow:
        loader = LOADERS.get(lane.name)
        if loader is None:
            return flow
        folder = tmp_path_factory.mktemp(f"{lane.name}-data")
        done: dict[str, N.Node] = {}

        def swap(scan: N.Scan) -> N.Node:
            if not isinstance(scan.source, ArrowSource):
                return scan
            if scan.source not in done:
                name = f"t{len(done)}"
                done[scan.source] = loader(folder, name, scan.source.table).plan
            return done[scan.source]

        return ei.Flow(replace_scans(flow.plan, swap))

    return load
