"""The kernel-target registry: targets come from the `eidos.isa.backends` entry points, load lazily,
and one that fails to load is listed as unavailable with the reason, never an ImportError."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import EntryPoint

import numpy as np
import pytest

from eidos.errors import BackendUnavailable, PlanError
from eidos.isa import registry
from eidos.isa.backends.reference import ReferenceBackend

GROUP = registry.ENTRY_POINT_GROUP


class Renamed(ReferenceBackend):
    name = "renamed"


def unavailable_reason():
    """The probe the registry asks (this module is Renamed's module)."""
    return PROBE["reason"]


PROBE = {"reason": None}


@pytest.fixture
def entries(monkeypatch):
    """The registry reading only the entry points a test gives it; the real ones come back afterwards."""
    saved = dict(registry._entries)

    def use(*eps):
        monkeypatch.setattr(registry, "entry_points", lambda group: [e for e in eps if e.group == group])
        monkeypatch.setattr(registry, "_loaded", False)
        registry._entries.clear()

    yield use
    registry._entries.clear()
    registry._entries.update(saved)
    PROBE["reason"] = None


def ep(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=GROUP)


def test_the_built_in_targets_come_from_the_entry_points():
    assert {"reference", "cpu", "triton"} <= set(registry.names())
    info = registry.info("reference")
    assert info.available and info.source == "eidos.isa.backends.reference:ReferenceBackend"
    assert isinstance(registry.create("reference"), ReferenceBackend)


def test_listing_targets_imports_no_engine():
    code = ("import sys; from eidos.isa import registry; from eidos.tensor import backend; "
            "print(registry.names(), any(m in sys.modules for m in ('numba', 'torch', 'triton')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("] ")[1].strip() == "False" and "'cpu'" in out


def test_a_target_that_fails_to_load_is_unavailable_with_the_reason(entries):
    entries(ep("renamed", f"{__name__}:Renamed"), ep("broken", "tests.isa.no_such_module:Target"),
            ep("wrong", f"{__name__}:PROBE"))
    assert registry.names() == ["renamed", "broken", "wrong"]
    got = {t.name: t for t in registry.targets()}
    assert got["renamed"].available and got["renamed"].reason == ""
    assert not got["broken"].available
    assert got["broken"].reason.startswith("failed to load: ModuleNotFoundError: No module named 'tests.isa.no_such")
    assert "must be a subclass of eidos.isa.target.Target" in got["wrong"].reason
    with pytest.raises(BackendUnavailable, match=r"kernel target 'broken' \(tests.isa.no_such_module:Target\) "
                                                 "failed to load: ModuleNotFoundError"):
        registry.create("broken")


def test_a_target_module_says_why_it_cannot_run_here(entries):
    entries(ep("renamed", f"{__name__}:Renamed"))
    PROBE["reason"] = "needs a flux capacitor; pip install flux"
    info = registry.info("renamed")
    assert not info.available and info.reason == "needs a flux capacitor; pip install flux"
    assert str(info) == f"renamed ({__name__}:Renamed): unavailable: needs a flux capacitor; pip install flux"
    with pytest.raises(BackendUnavailable, match="kernel target 'renamed' is unavailable: needs a flux capacitor"):
        registry.create("renamed")


def test_an_unknown_name_lists_the_targets(entries):
    entries(ep("renamed", f"{__name__}:Renamed"))
    with pytest.raises(BackendUnavailable, match="no kernel target called 'renamd'; kernel targets: renamed; did you "
                                                 "mean 'renamed'"):
        registry.target_class("renamd")


def test_register_target_at_run_time(entries):
    entries()
    with pytest.raises(PlanError, match="must be a subclass of eidos.isa.target.Target"):
        registry.register_target("bad", dict)
    registry.register_target("renamed", Renamed)
    assert registry.names() == ["renamed"] and registry.target_class("renamed") is Renamed
    registry.unregister_target("renamed")
    assert registry.names() == []


def test_class_names_resolve_through_the_registry(entries):
    from eidos.isa import backends

    entries(ep("renamed", f"{__name__}:Renamed"))
    assert backends.Renamed is Renamed
    assert backends.available() == {"renamed": None}
    with pytest.raises(AttributeError, match="no attribute 'CpuBackend'; kernel targets: renamed"):
        _ = backends.CpuBackend


def test_the_tensor_layer_has_a_backend_per_target(entries):
    """Tensor dispatch is built from the registered targets: a new one runs host arrays under its name,
    after gpu and cpu and before the reference interpreter."""
    from eidos.tensor import backend as tb

    entries(ep("cpu", "eidos.isa.backends.cpu:CpuBackend"), ep("reference", f"{ReferenceBackend.__module__}:"
                                                                             "ReferenceBackend"),
            ep("renamed", f"{__name__}:Renamed"), ep("triton", "eidos.isa.backends.triton:TritonBackend"))
    made = tb._from_targets()
    assert list(made) == ["gpu", "cpu", "renamed", "reference"]
    assert type(made["gpu"]) is tb.GPUBackend and type(made["cpu"]) is tb.CPUBackend
    assert type(made["renamed"]) is tb.IsaBackend and made["renamed"].is_available()
    from eidos import isa
    from eidos.isa import Address, LaunchConfig, Type

    x = np.arange(8, dtype=np.float32)
    prog = isa.ProgramBuilder().add(isa.ParallelMapBinary(
        dst_array=Address.buffer(2), src_a=Address.buffer(1), src_b=Address.buffer(1), count=8,
        operation=isa.BinaryMapOperation.Add, ty=Type.F32)).build()
    out = np.zeros(8, dtype=np.float32)
    made["renamed"].execute(prog, [x, out], LaunchConfig.linear(8))
    assert isinstance(made["renamed"].isa, Renamed)
    np.testing.assert_array_equal(out, 2 * x)
