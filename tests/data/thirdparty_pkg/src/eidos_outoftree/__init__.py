"""A third-party lane and kernel target: eidos's reference lane and reference interpreter under a new
name. Installing the package is all it takes for eidos (and its shared test suites) to find them."""

from __future__ import annotations

from eidos.isa.backends.reference import ReferenceBackend
from eidos.lanes.reference import ReferenceLane


class OutOfTreeLane(ReferenceLane):
    name = "outoftree"


class OutOfTreeTarget(ReferenceBackend):
    name = "outoftree"
