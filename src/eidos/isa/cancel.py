"""Cooperative cancellation of work running in this thread (a service cancelling a client's run).

`scope(event)` marks the work this thread runs from now on as cancellable by `event`; `check(what)`
raises when it is set. The reference interpreter checks between slices of a thread's steps, the
remote service between operations and batches; a compiled kernel already launched runs to its end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from eidos.errors import ExecutionError

_local = threading.local()


class Cancelled(ExecutionError):
    """The work was cancelled before it finished; nothing it would have returned was kept."""


@contextmanager
def scope(event: threading.Event) -> Iterator[None]:
    previous = getattr(_local, "event", None)
    _local.event = event
    try:
        yield
    finally:
        _local.event = previous


def check(what: str) -> None:
    event = getattr(_local, "event", None)
    if event is not None and event.is_set():
        raise Cancelled(f"{what} was cancelled before it finished")
