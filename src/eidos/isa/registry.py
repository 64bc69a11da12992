"""The kernel targets: built-in and third-party ones come through the entry point group
`eidos.isa.backends`; `register_target` adds one at run time.

Everything that needs to know which targets exist (eidos.isa.backends, the tensor dispatcher, the
Triton lane, the shared instruction suite, `eidos backends --targets`) asks here. A target's module is
imported only when the target is first used or its availability asked, so listing names needs no
numba, torch or triton. A target that fails to load is listed as unavailable with the reason, never
an ImportError. A target's module may define `unavailable_reason() -> str | None` (None: it runs
here) for what importing cannot tell, such as a missing device.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points

from eidos.errors import BackendUnavailable, PlanError, no_such

ENTRY_POINT_GROUP = "eidos.isa.backends"

# Targets whose memory lives on another machine (an eidos service): no local work is dispatched to them and
# this machine's speed matrix does not time them; a user reaches them by name or through 'remote:' tensors.
ELSEWHERE = frozenset({"remote"})


class _Entry:
    """One registered target: where it comes from and, once loaded, its class (or why it did not load)."""

    def __init__(self, name: str, source: str, load: Callable[[], object]):
        self.name, self.source, self._load = name, source, load
        self._cls: type | None = None
        self._error: BaseException | None = None
        self._probe: Callable[[], str | None] | None = None   # its module's unavailable_reason, if any

    def load(self) -> type:
        if self._cls is None and self._error is None:
            try:
                self._cls = _check(self.name, self._load())
            except Exception as e:  # noqa: BLE001 - kept as the target's unavailability reason
                self._error = e
            else:
                self._probe = getattr(sys.modules.get(self._cls.__module__), "unavailable_reason", None)
        if self._error is not None:
            raise BackendUnavailable(f"kernel target {self.name!r} ({self.source}) "
                                     f"{_failed(self._error)}") from self._error
        return self._cls

    def reason(self) -> str:
        """'' when the target runs here, else why not."""
        try:
            self.load()
        except BackendUnavailable:
            return _failed(self._error)
        if self._probe is None:
            return ""
        try:
            why = self._probe()
        except Exception as e:  # noqa: BLE001 - a probe that fails makes the target unavailable, with why
            return f"availability check failed: {type(e).__name__}: {e}"
        return why or ""


def _failed(error: BaseException) -> str:
    return f"failed to load: {type(error).__name__}: {error}"


def _check(name: str, obj: object) -> type:
    from .target import Target

    if not (isinstance(obj, type) and issubclass(obj, Target)):
        raise PlanError(f"kernel target {name!r} must be a subclass of eidos.isa.target.Target, "
                        f"got {obj!r}")
    return obj


_entries: dict[str, _Entry] = {}
_loaded = False
_lock = threading.Lock()


def _load_entry_points() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name not in _entries:
                _entries[ep.name] = _Entry(ep.name, ep.value, ep.load)
        _loaded = True


@dataclass(frozen=True)
class TargetInfo:
    name: str
    source: str       # "module:Class", where the target comes from
    available: bool
    reason: str       # '' when available

    def __str__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.reason}"
        return f"{self.name} ({self.source}): {state}"


def names() -> list[str]:
    """Every registered target's name, in registration order; imports no target."""
    _load_entry_points()
    return list(_entries)


def _entry(name: str) -> _Entry:
    _load_entry_points()
    try:
        return _entries[name]
    except KeyError:
        raise no_such("kernel target", name, _entries) from None


def reason(name: str) -> str:
    """'' when the target `name` runs here, else why not."""
    return _entry(name).reason()


def info(name: str) -> TargetInfo:
    """The target `name`, whether it runs here, and why not."""
    e = _entry(name)
    why = e.reason()
    return TargetInfo(name, e.source, not why, why)


def targets() -> list[TargetInfo]:
    """Every registered target with whether it runs here and why not (imports each target's module)."""
    return [info(n) for n in names()]


def target_class(name: str) -> type:
    """The class of the target `name`; BackendUnavailable names why when it failed to load."""
    return _entry(name).load()


def create(name: str, *args, **kwargs):
    """A new instance of the target `name` (arguments go to its constructor); BackendUnavailable when
    it does not run here, with the reason."""
    e = _entry(name)
    cls = e.load()
    why = e.reason()
    if why:
        raise BackendUnavailable(f"kernel target {name!r} is unavailable: {why}")
    return cls(*args, **kwargs)


def class_named(class_name: str) -> type | None:
    """The registered target class whose entry point names `class_name` (None: none does); lets
    `from eidos.isa.backends import CpuBackend` resolve through the registry."""
    _load_entry_points()
    for e in _entries.values():
        if e.source.rpartition(":")[2].strip() == class_name:
            return e.load()
    return None


def register_target(name: str, cls: type) -> None:
    """Add (or replace) the target `name` at run time (a Target subclass)."""
    if not isinstance(name, str) or not name:
        raise PlanError(f"register_target needs a non-empty name, got {name!r}")
    _check(name, cls)
    _load_entry_points()
    _entries[name] = _Entry(name, f"{cls.__module__}:{cls.__qualname__}", lambda: cls)


def unregister_target(name: str) -> None:
    """Remove a target registered at run time (tests use this to clean up)."""
    _load_entry_points()
    _entries.pop(name, None)


__all__ = ["ENTRY_POINT_GROUP", "TargetInfo", "names", "reason", "info", "targets", "target_class", "create",
           "class_named", "register_target", "unregister_target"]
