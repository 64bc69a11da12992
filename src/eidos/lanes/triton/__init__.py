"""The GPU lane: numeric map work of a Flow lowered to Atlas ISA programs run by the Triton kernel target."""

from __future__ import annotations

import os

import pyarrow as pa

from eidos.errors import BackendUnavailable
from eidos.hal import devices
from eidos.hal.lane import Availability, Estimate, Lane, installed
from eidos.hal.memo import once
from eidos.ir import nodes as N
from eidos.lanes.triton.coverage import COVERAGE, extra_gaps

INSTALL = "pip install 'eidos[gpu]'"


class TritonLane(Lane):
    """Runs Scan/Filter/Project/Aggregate over numeric and Boolean columns on the device: each map step
    is one ISA program (docs/triton-lane.md); the planner gives it the numeric part of a plan
    when a GPU is present and its cost model says the GPU pays for that part (rule 4), and the
    CPU lanes the rest.

    Chosen automatically only when detect_devices() sees a GPU; `engine="triton"` also runs it under
    Triton's interpreter (TRITON_INTERPRET=1), which is how tests run it on a machine without one.
    """

    name = "triton"
    kind = "gpu"
    coverage = COVERAGE
    reads = frozenset({"local"})
    names_failing_values = True   # its faults name the operation, the values and the row (execute.py)

    def is_available(self) -> Availability:
        missing = self._missing()
        if missing:
            return Availability(False, missing)
        if devices.detect_devices().gpu_count == 0:
            return Availability(False, "no GPU (detect_devices().gpu_count == 0); engine='triton' runs it "
                                       "under Triton's interpreter when TRITON_INTERPRET=1")
        return self._target()

    def is_available_when_named(self) -> Availability:
        missing = self._missing()
        if missing:
            return Availability(False, missing)
        from eidos.isa.backends.triton.device_memory import interpreting

        if devices.detect_devices().gpu_count == 0 and not interpreting() and self._target_name() == "triton":
            return Availability(False, "no GPU here and TRITON_INTERPRET is not set: set TRITON_INTERPRET=1 "
                                       "(before anything imports triton) to run it in Triton's interpreter")
        return self._target()

    def supports(self, plan: N.Node) -> list[str]:
        return super().supports(plan) + once(plan, "triton.extra_gaps", lambda: extra_gaps(plan))

    def estimate(self, plan: N.Node) -> Estimate:
        """The GPU cost model (cost.py); the planner weighs it against the CPU lane's under rule 4."""
        from eidos.hal.constants import key
        from eidos.lanes.triton.cost import DEFAULTS, ENV, estimate

        return once(plan, f"triton.estimate {os.environ.get(ENV, '')} {key(DEFAULTS)}", lambda: estimate(plan))

    def constants(self):
        from eidos.lanes.triton.cost import DEFAULTS

        return DEFAULTS

    def execute(self, plan: N.Node) -> pa.Table:
        available = self.is_available_when_named()
        if not available:
            raise BackendUnavailable(f"lane 'triton' is unavailable: {available.reason}")
        from eidos.lanes.triton.execute import execute

        return execute(plan)

    @staticmethod
    def _missing() -> str:
        absent = [m for m in ("torch", "triton") if not installed(m)]
        return f"{' and '.join(absent)} not installed: {INSTALL}" if absent else ""

    @staticmethod
    def _target_name() -> str:
        from eidos.lanes.triton.target import target_name

        return target_name()

    def _target(self) -> Availability:
        from eidos.lanes.triton.target import target_class

        try:
            target_class(self._target_name())
        except BackendUnavailable as e:
            return Availability(False, str(e))
        return Availability(True)
