"""What this machine has: cores, memory (cgroup-aware), CPU vector flags, GPUs.

GPUs are found through NVML (ctypes) or `nvidia-smi`, never by importing
torch. Detected once per process.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from eidos.errors import PlanError


@dataclass(frozen=True)
class DeviceInfo:
    cpu_cores: int
    memory_limit_bytes: int
    has_avx2: bool
    has_avx512: bool
    has_neon: bool
    gpu_count: int
    gpu_names: tuple[str, ...]
    gpu_memory_bytes: tuple[int, ...]
    platform_system: str
    forced_backend: str | None

    def __str__(self) -> str:
        gpus = ", ".join(f"{n} ({m / 2**30:.0f} GiB)" for n, m in zip(self.gpu_names, self.gpu_memory_bytes))
        flags = [f for f, on in (("avx2", self.has_avx2), ("avx512", self.has_avx512), ("neon", self.has_neon)) if on]
        return "\n".join([
            f"platform: {self.platform_system}",
            f"cpu cores: {self.cpu_cores}",
            f"cpu flags: {', '.join(flags) or 'none detected'}",
            f"memory limit: {self.memory_limit_bytes / 2**30:.1f} GiB",
            f"gpus: {self.gpu_count}" + (f" ({gpus})" if gpus else ""),
            f"forced lane (EIDOS_BACKEND): {self.forced_backend or 'none'}",
        ])


@functools.cache
def detect_devices() -> DeviceInfo:
    """This machine's devices, detected once per process.

    Examples:
        >>> info = ei.detect_devices()
        >>> info.cpu_cores >= 1, info.gpu_count == len(info.gpu_names)
        (True, True)
    """
    flags = _cpu_flags()
    names, memory = _gpus()
    return DeviceInfo(
        cpu_cores=_cpu_cores(),
        memory_limit_bytes=_memory_limit(),
        has_avx2="avx2" in flags,
        has_avx512="avx512f" in flags,
        has_neon=bool({"neon", "asimd"} & flags) or platform.machine().lower() in ("arm64", "aarch64"),
        gpu_count=len(names),
        gpu_names=tuple(names),
        gpu_memory_bytes=tuple(memory),
        platform_system=platform.system(),
        forced_backend=os.environ.get("EIDOS_BACKEND") or None,
    )


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _cpu_cores() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _read("/sys/fs/cgroup/cpu.max")  # cgroup v2: "max 100000" or "200000 100000"
    if quota and not quota.startswith("max"):
        q, period = (int(x) for x in quota.split()[:2])
        cores = min(cores, max(1, q // period))
    return cores


def _memory_limit() -> int:
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
    limits = [physical] if physical > 0 else []
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = _read(path)
        if text and text.isdigit() and int(text) < 2**60:
            limits.append(int(text))
    return min(limits) if limits else 8 * 2**30


@functools.cache
def cpu_features() -> str:
    """The CPU's model and feature flags (Linux: /proc/cpuinfo), "model|flags", as numba compiles for the host CPU."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read(16384)
    except OSError:
        return platform.processor()
    model = flags = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = " ".join(sorted(value.split()))
        if model and flags:
            break
    return f"{model}|{flags}"


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo; elsewhere platform.processor())."""
    return cpu_features().partition("|")[0] or platform.processor() or platform.machine()


def cache_root() -> Path:
    """Where eidos keeps what it learns of this machine: $EIDOS_CACHE_DIR, else $XDG_CACHE_HOME/eidos, else
    ~/.cache/eidos (asked by every auto plan: the path is built once per value of those variables)."""
    env = os.environ
    return _cache_root(env.get("EIDOS_CACHE_DIR"), env.get("XDG_CACHE_HOME"), env.get("HOME"))


@functools.lru_cache(maxsize=8)
def _cache_root(folder: str | None, xdg: str | None, home: str | None) -> Path:
    return Path(folder or os.path.join(xdg or os.path.join(os.path.expanduser("~"), ".cache"), "eidos"))


def _cpu_flags() -> set[str]:
    flags = cpu_features().partition("|")[2]
    if flags:
        return set(flags.split())
    if platform.system() == "Darwin" and shutil.which("sysctl"):
        out = subprocess.run(["sysctl", "-a"], capture_output=True, text=True, timeout=5).stdout.lower()
        return {f for f in ("avx2", "avx512f", "neon") if f in out}
    return set()


def _gpus() -> tuple[list[str], list[int]]:
    found = _gpus_nvml()
    if found is None:
        found = _gpus_smi()
    return found or ([], [])


def _gpus_nvml() -> tuple[list[str], list[int]] | None:
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        count = ctypes.c_uint()
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return None
        names, memory = [], []
        for i in range(count.value):
            handle = ctypes.c_void_p()
            nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle))
            name = ctypes.create_string_buffer(96)
            nvml.nvmlDeviceGetName(handle, name, 96)

            class Memory(ctypes.Structure):
                _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

            mem = Memory()
            nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem))
            names.append(name.value.decode())
            memory.append(mem.total)
        return names, memory
    finally:
        nvml.nvmlShutdown()


def _gpus_smi() -> tuple[list[str], list[int]] | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    names, memory = [], []
    for line in out.stdout.strip().splitlines():
        name, mib = (part.strip() for part in line.rsplit(",", 1))
        names.append(name)
        memory.append(int(float(mib)) * 2**20)
    return names, memory


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6, "mib": 2**20,
          "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12, "tib": 2**40}
DEFAULT_BUDGET_FRACTION = 0.5


def parse_size(text: str) -> int:
    """'4GB', '512MiB', '1e9' -> bytes; PlanError with the accepted forms otherwise."""
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS:
        raise PlanError(f"cannot read memory size {text!r}; use bytes or a number with a unit such as "
                        "512MiB, 4GB, 2GiB")
    return int(float(match.group(1)) * _UNITS[unit])


def memory_budget() -> int:
    """Bytes a plan may hold in memory: EIDOS_MEMORY_BUDGET, else half the detected memory limit."""
    text = os.environ.get("EIDOS_MEMORY_BUDGET")
    if text:
        return parse_size(text)
    return int(detect_devices().memory_limit_bytes * DEFAULT_BUDGET_FRACTION)


def budget_text(budget: int) -> str:
    """How a user would name `budget` for messages: 'EIDOS_MEMORY_BUDGET=64MiB' when it came from there."""
    text = os.environ.get("EIDOS_MEMORY_BUDGET")
    if text and parse_size(text) == budget:
        return f"EIDOS_MEMORY_BUDGET={text.strip()}"
    return (f"the memory budget {budget / 2**20:.0f} MiB (by default half the memory limit eidos detects; "
            "EIDOS_MEMORY_BUDGET sets it)")
