"""The lanes: built-in and third-party ones come through the entry point group
`eidos.backends`; `register_backend` adds one at run time.

The HAL knows lanes only through here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from importlib.metadata import entry_points

from eidos.errors import BackendUnavailable, PlanError, no_such
from eidos.hal.lane import Availability, Lane

ENTRY_POINT_GROUP = "eidos.backends"

_lanes: dict[str, Lane] = {}
_loaded = False
_lock = threading.Lock()


class BrokenLane(Lane):
    """Stands in for an entry point that failed to load, so the failure is visible, not silent."""

    kind = "unknown"

    def __init__(self, name: str, error: BaseException):
        self.name, self._error = name, error

    def is_available(self) -> Availability:
        return Availability(False, f"failed to load: {type(self._error).__name__}: {self._error}")

    def execute(self, plan):  # pragma: no cover - never chosen while unavailable
        raise BackendUnavailable(f"lane {self.name!r} {self.is_available().reason}")


def _instantiate(name: str, obj: object) -> Lane:
    lane = obj() if isinstance(obj, type) else obj
    if not isinstance(lane, Lane):
        raise PlanError(f"lane {name!r} must be an eidos.hal.lane.Lane (subclass or instance), "
                        f"got {type(lane).__name__}")
    if not lane.name:
        lane.name = name
    return lane


def _load_entry_points() -> None:
    global _loaded
    with _lock:
        if _loaded:
            return
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in _lanes:
                continue
            try:
                _lanes[ep.name] = _instantiate(ep.name, ep.load())
            except Exception as e:  # noqa: BLE001 - recorded as the lane's unavailability reason
                _lanes[ep.name] = BrokenLane(ep.name, e)
        _loaded = True


def register_backend(name: str, backend: Lane | type[Lane]) -> Lane:
    """Add (or replace) a lane under `name`; returns the lane instance.

    `backend` is an `eidos.Lane` subclass (instantiated with no arguments) or instance.
    Third-party lanes can instead register through the entry point group `eidos.backends`.

    Examples:
        >>> from eidos.lanes.reference import ReferenceLane
        >>> lane = ei.register_backend("oracle", ReferenceLane)
        >>> ei.from_pydict({"a": [1, 2]}).filter(col("a") > 1).run(engine="oracle").to_pydict()
        {'a': [2]}
        >>> from eidos.hal.registry import unregister_backend
        >>> unregister_backend("oracle")
    """
    if not isinstance(name, str) or not name:
        raise PlanError(f"register_backend needs a non-empty name, got {name!r}")
    _load_entry_points()
    lane = _instantiate(name, backend)
    lane.name = name
    _lanes[name] = lane
    return lane


def unregister_backend(name: str) -> None:
    """Remove a lane registered at run time (tests use this to clean up)."""
    _load_entry_points()
    _lanes.pop(name, None)


def lanes() -> list[Lane]:
    """Every registered lane, available or not."""
    _load_entry_points()
    return list(_lanes.values())


def get(name: str) -> Lane:
    """The lane called `name`; BackendUnavailable lists the lanes when there is none."""
    _load_entry_points()
    try:
        return _lanes[name]
    except KeyError:
        raise no_such("lane", name, sorted(_lanes)) from None


@dataclass(frozen=True)
class LaneInfo:
    name: str
    kind: str
    available: bool
    reason: str

    def __str__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.reason}"
        return f"{self.name} ({self.kind}): {state}"


def backends() -> list[LaneInfo]:
    """Every lane with its kind, whether it can run here, and why not.

    Examples:
        >>> lanes = {info.name: info for info in ei.backends()}
        >>> print(lanes["reference"])
        reference (reference): available
    """
    out = []
    for lane in lanes():
        a = lane.is_available()
        out.append(LaneInfo(lane.name, lane.kind, a.ok, a.reason))
    return out
