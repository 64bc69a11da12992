"""Device detection and the memory budget."""

from __future__ import annotations

import pytest

import eidos as ei
from eidos.errors import PlanError
from eidos.hal import devices


def test_detect_devices_is_cached_and_sane():
    d = ei.detect_devices()
    assert d is ei.detect_devices()
    assert d.cpu_cores >= 1 and d.memory_limit_bytes > 2**20
    assert d.gpu_count == len(d.gpu_names) == len(d.gpu_memory_bytes)
    assert d.platform_system
    assert "cpu cores" in str(d)


def test_tensor_namespace_shares_detect_devices():
    from eidos.hal.devices import detect_devices

    assert ei.detect_devices is detect_devices


def test_forced_backend_from_environment(monkeypatch):
    monkeypatch.setenv("EIDOS_BACKEND", "duckdb")
    devices.detect_devices.cache_clear()
    try:
        assert ei.detect_devices().forced_backend == "duckdb"
    finally:
        monkeypatch.delenv("EIDOS_BACKEND")
        devices.detect_devices.cache_clear()


@pytest.mark.parametrize("text,expected", [("1024", 1024), ("4GB", 4 * 10**9), ("512MiB", 512 * 2**20),
                                           ("1.5 GiB", int(1.5 * 2**30)), ("10B", 10)])
def test_parse_size(text, expected):
    assert devices.parse_size(text) == expected


def test_bad_budget_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "lots")
    with pytest.raises(PlanError, match="cannot read memory size 'lots'; use bytes or a number with a unit"):
        devices.memory_budget()


def test_default_budget_is_half_the_memory(monkeypatch):
    monkeypatch.delenv("EIDOS_MEMORY_BUDGET", raising=False)
    assert devices.memory_budget() == int(ei.detect_devices().memory_limit_bytes * 0.5)


def test_gpus_found_through_nvidia_smi(monkeypatch):
    import subprocess

    class Done:
        returncode = 0
        stdout = "NVIDIA H200, 143771\nNVIDIA H200, 143771\n"

    monkeypatch.setattr(devices.shutil, "which", lambda exe: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: Done())
    names, memory = devices._gpus_smi()
    assert names == ["NVIDIA H200", "NVIDIA H200"] and memory[0] == 143771 * 2**20
