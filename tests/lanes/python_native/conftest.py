"""The python lane under test: `free(**options)` registers a configured FreeLane as "python" for one test."""

from __future__ import annotations

import os

import pytest

import eidos as ei
from eidos.hal import registry
from tests.lanes.helpers import lane_or_skip


@pytest.fixture
def free():
    original = lane_or_skip("python")

    def use(**options):
        from eidos.lanes.python_native import FreeLane

        return ei.register_backend("python", FreeLane(**options))

    yield use
    registry.register_backend("python", original)


def worker_processes() -> set[int]:
    """This process's live children that are python-lane workers (zombies count: nobody reaped them)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if ppid == os.getpid() and b"python_native.worker" in cmdline:
            found.add(int(entry))
    return found
