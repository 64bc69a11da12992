"""The lanes' cost constants as data: a default set fitted on one machine, and the set `eidos calibrate`
measured on this one.

Each lane with a cost model declares its constants in one place (its cost.py's `DEFAULTS`, a `Constants`
naming the machine they were fitted on). The planner uses, per lane, `in_use(DEFAULTS)`:

- the values `eidos calibrate` measured here (costs.json in the user's cache folder, eidos.isa.cache's
  cache_root()), when that file was written by this eidos version on this machine (cores, memory, CPU model);
- for every other constant, the default scaled to this machine: per-row work of a lane that spreads rows over
  threads divided by sqrt(cores here / cores fitted on) (the 16-core host ran the 2-vCPU fits 2 to 4 times
  faster: 8 times the cores, sqrt 2.8), host scan rates multiplied by the memory bandwidth here (the one
  `eidos calibrate` measured, else the defaults') over the defaults'.

A file for another machine or version is ignored and a damaged one treated as absent; either way the set's
`source` says so, and explain() shows it beside the estimate.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

FILE = "costs.json"


@dataclass(frozen=True)
class Machine:
    """Where constants were measured: cores, memory limit, CPU model, one-thread copy bandwidth (bytes/s
    read and written)."""

    cores: int
    memory_bytes: int
    cpu: str
    bandwidth: float
    label: str = ""

    def same(self, other: Machine) -> bool:
        return (self.cores, self.memory_bytes, self.cpu) == (other.cores, other.memory_bytes, other.cpu)

    def __str__(self) -> str:
        return self.label or f"{self.cores} cores, {self.memory_bytes / 2**30:.0f} GiB, {self.cpu!r}"


# The 2-vCPU development VM the CPU lanes' defaults were fitted on (bench/RESULTS.md, "Where the CPU lanes' cost
# constants come from"); its one-thread copy bandwidth by calibrate's probe (9.6 GB/s, shared by other sessions).
DEV_VM = Machine(2, 25_276_510_208, "Intel(R) Xeon(R) Processor", 10e9, "the 2-vCPU development VM")


@dataclass(frozen=True)
class Constants:
    """One lane's cost constants: `values` by name, the machine they hold for, and how they came to be.

    `threaded`: per-row seconds the lane spreads over the cores; `host_rates`: bytes per second bound by host
    memory; `probes`: calibrate's probe name -> the constant it measures (in the order they run);
    `estimate(plan, values)`: the lane's cost model with these values."""

    lane: str
    values: Mapping[str, float]
    machine: Machine
    estimate: Callable = field(compare=False, repr=False)
    threaded: frozenset[str] = frozenset()
    host_rates: frozenset[str] = frozenset()
    probes: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def scaled(self, here: Machine) -> Constants:
        """The defaults moved to `here` by its cores and memory bandwidth (see the module's docstring)."""
        cores = math.sqrt(self.machine.cores / max(here.cores, 1))
        bandwidth = here.bandwidth / self.machine.bandwidth
        values = {k: v * cores if k in self.threaded else v * bandwidth if k in self.host_rates else v
                  for k, v in self.values.items()}
        how = [f"per-row work x{cores:.2f} for {here.cores} cores"] if cores != 1 and self.threaded else []
        how += [f"host scan rates x{bandwidth:.2f} for {here.bandwidth / 1e9:.1f} GB/s"] if bandwidth != 1 else []
        what = f"defaults fitted on {self.machine}" + (f", scaled ({'; '.join(how)})" if how else "")
        return replace(self, values=values, machine=here, source=what)


def here(bandwidth: float | None = None) -> Machine:
    """This machine (detect_devices' cores and memory, the CPU model); `bandwidth` as measured, else the
    defaults' machine's."""
    from eidos.hal.devices import cpu_model, detect_devices

    d = detect_devices()
    return Machine(d.cpu_cores, d.memory_limit_bytes, cpu_model(), bandwidth or DEV_VM.bandwidth)


def path() -> Path:
    """costs.json in the user's cache folder ($EIDOS_CACHE_DIR, else $XDG_CACHE_HOME/eidos, else ~/.cache/eidos)."""
    from eidos.hal.devices import cache_root

    return cache_root() / FILE


@dataclass(frozen=True)
class Calibration:
    """What costs.json holds for this machine: each lane's measured values, or why none are used."""

    lanes: Mapping[str, Mapping[str, float]]
    machine: Machine | None
    date: str = ""
    problem: str = ""          # why the file is not used (absent: empty, with no lanes)
    stamp: tuple = ()


_loaded: dict[str, Calibration] = {}


def current() -> Calibration:
    """The calibration file as it is now (read again only when it changed: inode, size, modification time)."""
    p = path()
    try:
        st = p.stat()
    except OSError:
        return Calibration({}, None, stamp=(str(p),))
    stamp = (str(p), st.st_ino, st.st_size, st.st_mtime_ns)
    hit = _loaded.get(str(p))
    if hit is None or hit.stamp != stamp:
        hit = _loaded[str(p)] = replace(read(p), stamp=stamp)
    return hit


def read(p: Path) -> Calibration:
    """costs.json at `p`; a damaged file, or one for another machine or eidos version, gives no lanes and the
    reason in `problem` (never an exception: planning goes on with the defaults)."""
    import eidos

    try:
        data = json.loads(p.read_text())
        m = data["machine"]
        machine = Machine(int(m["cores"]), int(m["memory_bytes"]), str(m["cpu"]), float(m["bandwidth"]))
        lanes = {str(lane): {str(k): float(v) for k, v in values.items()} for lane, values in data["lanes"].items()}
        if any(not (math.isfinite(v) and v > 0) for values in lanes.values() for v in values.values()):
            raise ValueError("a constant that is not a positive number")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return Calibration({}, None, problem=f"{p} is unreadable ({type(e).__name__}: {e}); "
                                             "run `eidos calibrate` to measure again")
    this = here()
    if not machine.same(this):
        return Calibration({}, machine, problem=f"{p} was measured on another machine ({machine}; this one: {this}); "
                                                "run `eidos calibrate` here")
    if data.get("eidos") != eidos.__version__:
        return Calibration({}, machine, problem=f"{p} was measured by eidos {data.get('eidos')} (this is "
                                                f"{eidos.__version__}); run `eidos calibrate` again")
    return Calibration(lanes, machine, str(data.get("date", "")))


_in_use: dict[tuple, Constants] = {}


def in_use(defaults: Constants) -> Constants:
    """The constants the planner uses for `defaults.lane` here (the module's docstring says which)."""
    cal = current()
    key = (id(defaults), *_stamp(cal))
    hit = _in_use.get(key)
    if hit is None:
        hit = _in_use[key] = _resolve(defaults, cal)
    return hit


def _stamp(cal: Calibration) -> tuple:
    """What in_use's answer depends on besides the lane: the calibration file and the machine (the
    defaults are scaled to it)."""
    from eidos.hal.devices import detect_devices

    return cal.stamp, detect_devices()


def values_for(defaults: Constants, values: Mapping[str, float] | None) -> tuple[Mapping[str, float], str]:
    """A lane's estimate's constants: `values` as given (a probe's or a test's, unlabelled), else the set in
    use here (in_use) with where it came from."""
    if values is not None:
        return values, ""
    chosen = in_use(defaults)
    return chosen.values, chosen.source


def _resolve(defaults: Constants, cal: Calibration) -> Constants:
    scaled = defaults.scaled(here(cal.machine.bandwidth if cal.machine and not cal.problem else None))
    measured = cal.lanes.get(defaults.lane, {})
    if cal.problem:
        return replace(scaled, source=f"{scaled.source}; {cal.problem}")
    if not measured:
        why = f"{path()} has none for {defaults.lane}" if cal.lanes else "no `eidos calibrate` run here"
        return replace(scaled, source=f"{scaled.source} ({why})")
    values = {**scaled.values, **{k: v for k, v in measured.items() if k in scaled.values}}
    rest = len(values) - len(set(measured) & set(values))
    return replace(scaled, values=values, source=f"measured here by `eidos calibrate` {cal.date}"
                   + (f", {rest} more from the {scaled.source}" if rest else ""))


def save(lanes: Mapping[str, Mapping[str, float]], machine: Machine, skipped: Mapping[str, str],
         seconds: float) -> Path:
    """Write costs.json atomically; the planner reads it from the next plan on."""
    import eidos
    from eidos.isa.cache import write_atomic

    p = path()
    data = {"eidos": eidos.__version__, "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": {"cores": machine.cores, "memory_bytes": machine.memory_bytes, "cpu": machine.cpu,
                        "bandwidth": machine.bandwidth},
            "seconds": round(seconds, 2), "lanes": lanes, "skipped": dict(skipped)}
    write_atomic(p, json.dumps(data, indent=1).encode())
    return p


def key(defaults: Constants) -> str:
    """Changes whenever in_use(defaults) may: for memoized estimates."""
    return f"{defaults.lane} {_stamp(current())}"
