"""Lane choice: the seed's five rules, in order, and explain().

1. explicit override (engine=... or EIDOS_BACKEND)
2. data locality (sources in one database run there)
3. data volume (input over the memory budget: cluster lane, else an out-of-core lane)
4. hardware (a GPU and numeric map work: the GPU lane)
5. logic type (opaque Python: the free lane; relational: the vector lane by cost model)

Every lane not chosen is recorded with why. A plan whose sources live in several places, that calls
opaque Python functions a free lane runs as steps (`Lane.python_steps_only`), or that holds numeric
work a GPU lane can take, is first cut into parts (eidos.hal.parts); each part is decided by the
same rules, and the decision of the plan that reads them lists them.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from eidos.errors import BackendUnavailable, PlanError, UnsupportedError
from eidos.hal import registry
from eidos.hal.devices import detect_devices, memory_budget
from eidos.hal.lane import Lane
from eidos.hal.parts import LOCALITY, OPAQUE, Cuts, Part, by_device, by_locality, by_opaque, opaque, places, reads
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.render import node_label, tree
from eidos.ir.sources import LOCAL, PartSource

# Preference among lanes that can run a plan, when no rule decides (lower first).
KIND_ORDER = {"vector": 0, "pushdown": 1, "streaming": 2, "gpu": 3, "cluster": 4, "free": 5, "remote": 6, "reference": 9}

# Device memory the GPU lane holds per byte of input: the input columns, their validity bytes, the padded
# outputs of each step (an estimate). A plan whose input needs more than the GPU has stays on the CPU.
DEVICE_MEMORY_PER_INPUT_BYTE = 2.0

RULES = {
    1: "explicit override",
    2: "data locality",
    3: "data volume",
    4: "hardware",
    5: "logic type",
}


@dataclass(frozen=True)
class Decision:
    """Where a plan runs and why; `fallbacks` are the capable lanes to try on UnsupportedError."""

    lane: Lane
    rule: int
    reason: str
    plan: N.Node
    rejected: tuple[tuple[str, str], ...] = ()
    fallbacks: tuple[Lane, ...] = ()
    notes: tuple[str, ...] = field(default=())
    parts: tuple[Part, ...] = ()   # the parts `plan` reads, at any depth, each decided (split plans)

    @property
    def lane_name(self) -> str:
        return self.lane.name

    def __str__(self) -> str:
        return render(self)


def describe_gaps(gaps: list[str]) -> str:
    """'lacks function x, dtype y; cannot read ...': what a lane lacks, then what it cannot reach."""
    lacks = [g for g in gaps if not g.startswith(("cannot", "sources"))]
    other = [g for g in gaps if g not in lacks]
    return "; ".join((["lacks " + ", ".join(lacks)] if lacks else []) + other)


# Lane kinds the planner leaves out in this context (`without`).
_left_out: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("eidos_left_out_kinds", default=frozenset())


@contextlib.contextmanager
def without(*kinds: str) -> Iterator[None]:
    """Plan without lanes of `kinds` while inside: a lane that runs pieces of a plan on this machine's
    own lanes (the cluster lane, inside its workers) must not be handed those pieces back."""
    token = _left_out.set(_left_out.get() | frozenset(kinds))
    try:
        yield
    finally:
        _left_out.reset(token)


class _Survey:
    """Each lane's availability and gaps for one plan, computed once."""

    def __init__(self, plan: N.Node):
        self.plan = plan
        self.rejected: dict[str, str] = {}
        self.capable: list[Lane] = []
        left_out = _left_out.get()
        for lane in sorted(registry.lanes(), key=lambda l: (KIND_ORDER.get(l.kind, 8), l.name)):
            if lane.kind in left_out:
                self.rejected[lane.name] = f"a {lane.kind} lane is running this plan's pieces here"
                continue
            a = lane.is_available()
            if not a:
                self.rejected[lane.name] = a.reason or "unavailable"
                continue
            gaps = lane.supports(plan)
            if gaps:
                self.rejected[lane.name] = describe_gaps(gaps)
                continue
            self.capable.append(lane)

    def of_kind(self, *kinds: str) -> list[Lane]:
        return [lane for lane in self.capable if lane.kind in kinds]


def decide(plan: N.Node, engine: str | None = None, *, address: str | None = None) -> Decision:
    """Optimize `plan`, cut it into parts where its sources or its work call for it, and choose the
    lane of each part and of the plan that reads them by the five rules. `address` says where the
    named lane runs (Lane.at)."""
    plan = plan.optimized
    forced = engine or _env_backend()
    if address is not None and not forced:
        raise PlanError(f"address={address!r} says where the lane named by engine= runs; name one "
                        "(a lane that runs elsewhere, such as a cluster lane)")
    if forced:
        how = "engine=" + repr(forced) if engine else f"EIDOS_BACKEND={forced}"
        return _forced(plan, forced, how + (f", address={address!r}" if address is not None else ""), address)
    notes: list[str] = []
    remote = _remote_places(plan)
    whole = _locality(plan, _Survey(plan), notes) if remote else None
    if whole is not None:
        return whole
    cuts = Cuts()
    if remote:
        plan = _cut_by_locality(plan, cuts)
    survey = _Survey(plan)
    decision = _volume(plan, survey, notes)
    free = _steps_lane(plan, survey) if decision is None else None
    if free is not None:   # rule 5 for the Python functions, before rule 4 looks at the rest
        plan = _cut_opaque(plan, cuts, free, 5, "opaque Python, the free lane runs it")
        step = _only_step(plan, cuts)
        if step is not None:
            return _with_parts(_finish(step.plan, _Survey(step.plan), free, 5, step.decision.reason, notes), cuts)
        survey = _Survey(plan)
    if decision is None:
        decision = _hardware(plan, survey, notes, cuts=cuts) or _logic(plan, survey, notes)
    if decision is not None:
        return _with_parts(decision, cuts)
    gaps = "\n".join(f"  {name}: {why}" for name, why in survey.rejected.items())
    raise UnsupportedError(f"no lane can run this plan:\n{gaps}")


def _env_backend() -> str | None:
    """EIDOS_BACKEND, unless it names a lane of a kind left out here (`without`): it forces the user's
    plans, not the pieces a cluster lane runs on this machine's lanes."""
    name = os.environ.get("EIDOS_BACKEND") or None
    left_out = _left_out.get()
    if name and left_out and any(l.name == name and l.kind in left_out for l in registry.lanes()):
        return None
    return name


def _steps_lane(plan: N.Node, survey: _Survey) -> Lane | None:
    """The free lane that runs the plan's Python functions as steps, when it calls any (rule 5)."""
    if not opaque(plan):
        return None
    lanes = [l for l in survey.capable if l.kind == "free" and l.python_steps_only]
    return lanes[0] if lanes else None


def _only_step(plan: N.Node, cuts: Cuts) -> Part | None:
    """The free part `plan` is the whole result of, if it is: that step is the plan, run by the free lane."""
    if isinstance(plan, N.Scan) and isinstance(plan.source, PartSource) and cuts.parts[plan.source.key].place == "free":
        return cuts.parts[plan.source.key]
    return None


def _cut_opaque(plan: N.Node, cuts: Cuts, free: Lane, rule: int, why: str) -> N.Node:
    """`plan` with its Python functions cut out as parts on `free` (decided by `rule`, `why`), each
    over a part that computes its input, decided by rule 5 (eidos.hal.parts.by_opaque)."""
    before = set(cuts.parts)
    rest = by_opaque(plan, cuts, lambda scan: free.can_read(scan.source) is None)
    for key in [k for k in cuts.parts if k not in before]:
        part = cuts.parts[key]
        if part.place == "free":
            calls = [node_label(part.plan)] if isinstance(part.plan, N.MapBatches) else [
                f"udf:{getattr(e.fn, '__qualname__', e.fn)}" for n in part.plan.walk()
                for x in n.expressions() for e in x.walk() if isinstance(e, E.Udf)]
            cuts.decide(key, Decision(free, rule, f"{why}: {', '.join(calls)}", part.plan))
            continue
        survey = _Survey(part.plan)
        decision = _logic(part.plan, survey, [])
        if decision is None:
            gaps = "; ".join(f"{name}: {w}" for name, w in survey.rejected.items())
            raise UnsupportedError(f"no lane can compute the input of a Python function, {node_label(part.plan)}: "
                                   f"{gaps}")
        cuts.decide(key, decision)
    return rest


def _remote_places(plan: N.Node) -> set[str]:
    return places(plan) - {LOCAL}


def _cut_by_locality(plan: N.Node, cuts: Cuts) -> N.Node:
    """`plan` with its largest subtrees over one database that a lane there can run cut out as parts,
    each decided by rule 2."""
    surveys: dict[int, _Survey] = {}

    def runs_there(node: N.Node) -> bool:
        survey = surveys[id(node)] = _Survey(node)
        return bool(survey.capable)

    rest = by_locality(plan, cuts, runs_there)
    for part in list(cuts.parts.values()):
        if part.by == LOCALITY and part.decision is None:
            cuts.decide(part.key, _locality(part.plan, surveys[id(part.plan)], [], "part"))
    return rest


def _with_parts(decision: Decision, cuts: Cuts) -> Decision:
    """The decision with the parts its plan reads (at any depth) listed; a split by locality says so."""
    parts = tuple(cuts.read_by(decision.plan)) if cuts.parts else ()
    if not parts:
        return decision
    decision = replace(decision, parts=parts)
    free = [p for p in parts if p.by == OPAQUE and p.place == "free"]
    if free and decision.rule != 1:
        n = len(free)
        reason = (f"opaque Python functions: {n} part{'s' if n > 1 else ''} on the free lane "
                  f"{', '.join(sorted({p.lane_name for p in free}))}, handed on as Arrow; {decision.lane_name} runs "
                  f"the rest (rule {decision.rule}, {RULES[decision.rule]}: {decision.reason})")
        decision = replace(decision, rule=5, reason=reason)
    pushed = [p for p in parts if p.by == LOCALITY]
    if not pushed:
        return decision
    where = ", ".join(f"{p.lane_name} ({p.place})" for p in pushed)
    reason = (f"sources live in several places: {len(pushed)} part{'s' if len(pushed) > 1 else ''} pushed down "
              f"to {where}, streamed back as Arrow; {decision.lane_name} finishes the plan "
              f"(rule {decision.rule}, {RULES[decision.rule]}: {decision.reason})")
    return replace(decision, rule=2, reason=reason)


def _forced(plan: N.Node, name: str, how: str, address: str | None = None) -> Decision:
    lane = registry.get(name).named()
    if address is not None:
        lane = lane.at(address)
    a = lane.is_available_when_named()
    if not a:
        raise BackendUnavailable(f"lane {name!r} ({how}) is unavailable: {a.reason}")
    gaps = lane.supports(plan)
    cuts = Cuts()
    if gaps and all(g.startswith("cannot read") for g in gaps):
        plan = _cut_by_locality(plan, cuts)  # the forced lane finishes what the databases cannot
        gaps = lane.supports(plan)
    if gaps:
        raise UnsupportedError(f"lane {name!r} ({how}) cannot run this plan: {describe_gaps(gaps)}; "
                               "run with engine=None to let eidos choose a lane that can")
    if lane.python_steps_only:   # it runs the Python functions; the rest runs where rule 5 puts it
        rest = _cut_opaque(plan, cuts, lane, 1, f"{how}, the plan's opaque Python")
        step = _only_step(rest, cuts)
        if step is not None:
            return _with_parts(replace(step.decision, plan=step.plan), cuts)
        decision = _logic(rest, _Survey(rest), [])
        if decision is None:
            raise UnsupportedError(f"lane {name!r} ({how}) runs only the plan's Python functions, and no lane "
                                   "can run the rest of it")
        reason = (f"{how}: {name} runs the plan's opaque Python functions; {decision.lane_name} runs the rest "
                  f"(rule 5, {RULES[5]}: {decision.reason})")
        return _with_parts(replace(decision, rule=1, reason=reason), cuts)
    others = tuple((l.name, f"not chosen: {how} asked for {name}") for l in registry.lanes() if l.name != lane.name)
    return _with_parts(Decision(lane, 1, f"{how}", plan, rejected=others), cuts)


def _finish(plan: N.Node, survey: _Survey, chosen: Lane, rule: int, reason: str,
            notes: list[str], why_not: dict[str, str] | None = None) -> Decision:
    rejected = dict(survey.rejected)
    for lane in survey.capable:  # by name: out_of_core() gives a configured copy of a surveyed lane
        if lane.name != chosen.name:
            rejected[lane.name] = (why_not or {}).get(lane.name) or _why_not(lane, rule, chosen)
    fallbacks = tuple(l for l in survey.capable if l.name != chosen.name and l.name in rejected)
    return Decision(chosen, rule, reason, plan, tuple(rejected.items()), fallbacks, tuple(notes))


def _why_not(lane: Lane, rule: int, chosen: Lane) -> str:
    if lane.kind == "reference":
        return "the oracle: slowest, used for checking and when no other lane can run the plan"
    return f"can run it, but rule {rule} ({RULES[rule]}) chose {chosen.name}"


def _locality(plan: N.Node, survey: _Survey, notes: list[str], what: str = "plan") -> Decision | None:
    """Rule 2 for a plan (or a part) whose sources all live in one database: run all of it there."""
    where = places(plan)
    if len(where) != 1 or LOCAL in where:
        return None
    (place,) = where
    lanes = sorted(survey.capable, key=lambda l: l.kind != "pushdown")
    if lanes:
        return _finish(plan, survey, lanes[0], 2,
                       f"every source lives in {place}: the whole {what} runs there; only the result moves", notes)
    notes.append(f"rule 2: every source lives in {place}, but no lane that reads it can run all of the plan; "
                 "the parts it can run are pushed down")
    return None


def _volume(plan: N.Node, survey: _Survey, notes: list[str]) -> Decision | None:
    sources = [n.source for n in plan.walk() if isinstance(n, N.Scan)]
    size = sum(s.estimated_bytes or 0 for s in sources)
    budget = memory_budget()
    if size <= budget:
        return None
    over = f"estimated input {_bytes(size)} exceeds the memory budget {_bytes(budget)}"
    cluster = survey.of_kind("cluster")
    if cluster:
        return _finish(plan, survey, cluster[0], 3, f"{over}: the cluster lane", notes)
    configured = [c for c in ((lane, lane.out_of_core(budget)) for lane in survey.capable) if c[1] is not None]
    configured.sort(key=lambda c: not c[1].memory_limited)  # only a hard limit keeps memory under the budget
    if configured:
        chosen = configured[0][1]
        why_not = {lane.name: f"out of core it runs {ooc.out_of_core_how}" for lane, ooc in configured[1:]}
        return _finish(plan, survey, chosen, 3, f"{over}: no cluster lane, so {chosen.name} runs it "
                                                f"{chosen.out_of_core_how}", notes, why_not)
    notes.append(f"rule 3: {over}, but no cluster or out-of-core lane can run it")
    return None


def _is_numeric_map(plan: N.Node) -> bool:
    allowed = (N.Scan, N.Filter, N.Project, N.Aggregate, N.Distinct, N.Union)
    for node in plan.walk():
        if not isinstance(node, allowed):
            return False
        if any(not (t.is_numeric or t.name == "Boolean") for t in node.schema.dtypes):
            return False
    return True


def _hardware(plan: N.Node, survey: _Survey, notes: list[str], *, cuts: Cuts) -> Decision | None:
    """Rule 4: with a GPU, a plan of numeric map work runs on the GPU lane; a plan that holds some
    (under a join, a sort, string work) is cut into parts by device (`cuts`): the numeric parts run
    there, the rest on the lane rule 5 picks, and each part's result is handed to the part that
    reads it. Only work big enough to pay goes to the GPU: the GPU lane's cost estimate must beat
    the CPU lane's (_gpu_pays)."""
    devices = detect_devices()
    if devices.gpu_count == 0:
        return None
    gpu_name = devices.gpu_names[0] if devices.gpu_names else "GPU"
    gpu = survey.of_kind("gpu")
    if gpu and _is_numeric_map(plan):
        pays, why = _gpu_pays(plan, gpu[0], survey)
        if pays:
            return _finish(plan, survey, gpu[0], 4, f"a GPU ({gpu_name}); {why}", notes)
        notes.append(f"rule 4: a GPU ({gpu_name}) is present; {why}")
        decision = _logic(plan, survey, notes)
        if decision is not None and decision.lane.kind == "gpu":  # no vector lane: rule 5 would take the GPU
            cpu_only = copy.copy(survey)                            # just turned down; the lane it was weighed
            cpu_only.capable = [l for l in survey.capable if l.kind != "gpu"]   # against runs it instead
            cpu_only.rejected = {**survey.rejected, **{l.name: why for l in survey.capable if l.kind == "gpu"}}
            decision = _logic(plan, cpu_only, notes)
        if decision is None:
            return None
        return replace(decision, rejected=tuple((n, why if n == gpu[0].name else w) for n, w in decision.rejected))
    lanes = [l for l in registry.lanes() if l.kind == "gpu" and l.is_available()]
    if not lanes:
        if _is_numeric_map(plan):
            notes.append("rule 4: a GPU is present and the plan is numeric, but no GPU lane can run it")
        return None
    small: list[str] = []

    def pays(part: N.Node) -> tuple[bool, str]:
        ok, why = _gpu_pays(part, lanes[0])
        if not ok:
            small.append(f"{node_label(part)}: {why}")
        return ok, why

    before = set(cuts.parts)
    rest = by_device(plan, lanes[0], cuts, pays)
    cut = [part for key, part in cuts.parts.items() if key not in before]
    for part in cut:   # each part by the rules: the GPU's by rule 4, its CPU inputs by rule 5
        if part.place == "gpu":
            cuts.decide(part.key, Decision(lanes[0], 4, f"a GPU ({gpu_name}); {part.why}", part.plan))
            continue
        decision = _logic(part.plan, _Survey(part.plan), [])
        if decision is None:   # no CPU lane can run an input the GPU lane cannot: the plan is not split
            return None
        cuts.decide(part.key, decision)
    notes += [f"rule 4: a GPU ({gpu_name}) is present; {lanes[0].name} could run the numeric part {s}" for s in small]
    on_gpu = [cuts.parts[p.key] for p in cut if p.place == "gpu"]   # in the order they were cut
    if not on_gpu:
        return None
    decision = _logic(rest, _Survey(rest), notes)
    if decision is None:
        return None
    ran = ", ".join(f"{describe_part(p, cuts.parts)} ({p.why})" for p in on_gpu)
    reason = (f"a GPU ({gpu_name}): {ran}, handed on as Arrow; {decision.lane_name} "
              f"finishes the plan (rule 5, {RULES[5]}: {decision.reason})")
    return replace(decision, rule=4, reason=reason)


def _gpu_pays(plan: N.Node, gpu: Lane, survey: _Survey | None = None) -> tuple[bool, str]:
    """Whether running `plan` on `gpu` beats the CPU lane rule 5 picks for it, by their cost estimates,
    and why, in words: both are affine in the input size, so the size where they cross is named."""
    survey = copy.copy(survey or _Survey(plan))
    survey.capable = [l for l in survey.capable if l.kind != "gpu"]
    cpu = _logic(plan, survey, [])
    if cpu is None:
        return True, "no CPU lane can run it"
    g, c = gpu.estimate(plan), cpu.lane.estimate(plan)
    # what fits the device comes first: a CPU lane without a cost model (the reference) must not send it
    size = next((e.input_bytes for e in (g, c) if e is not None and e.input_bytes is not None), None)
    memory = detect_devices().gpu_memory_bytes[:1]
    if size is not None and memory and size * DEVICE_MEMORY_PER_INPUT_BYTE > memory[0]:
        return False, (f"numeric but {_bytes(int(size))} estimated input: it would need about "
                       f"{_bytes(int(size * DEVICE_MEMORY_PER_INPUT_BYTE))} on the device, more than the GPU's "
                       f"{_bytes(memory[0])}; stays on {cpu.lane_name}")
    if g is None or c is None:
        return True, f"no cost estimate from {gpu.name if g is None else cpu.lane_name} to weigh them by"
    models = f"cost model: {gpu.name} {g.seconds:.3g} s, {cpu.lane_name} {c.seconds:.3g} s"
    if size is None or size <= 0:
        return g.seconds < c.seconds, (f"no input to speak of ({models})" if g.seconds < c.seconds else
                                       f"no input to speak of: stays on {cpu.lane_name} ({models})")
    per_gpu, per_cpu = (g.seconds - g.fixed_s) / size, (c.seconds - c.fixed_s) / size
    estimated = f"{_bytes(int(size))} estimated input"
    # the input size where the two lines cross; the GPU pays above it when each byte costs the CPU lane
    # more, below it when each byte costs the GPU more (the copy to the device) but its fixed cost is lower
    cross = (g.fixed_s - c.fixed_s) / (per_cpu - per_gpu) if per_cpu != per_gpu else math.inf
    x = _bytes(int(cross)) if math.isfinite(cross) else ""
    dearer = f"above it moving the columns to the device costs more than {cpu.lane_name} spends on them"
    if g.seconds < c.seconds:
        if per_cpu > per_gpu:
            when = f"the GPU pays above {x}" if cross > 0 else f"the GPU beats {cpu.lane_name} at any size"
        else:
            when = (f"the GPU pays up to {x} ({dearer})" if math.isfinite(cross)
                    else f"the GPU beats {cpu.lane_name} at any size")
        return True, f"numeric, {estimated}: {when} for this plan ({models})"
    if per_cpu > per_gpu:
        why = f"below the GPU crossover {x} for this plan"
    elif cross > 0 and math.isfinite(cross):
        why = f"the GPU pays only up to {x} for this plan ({dearer})"
    else:
        why = (f"the GPU does not pay at any size for this plan (each input byte costs {gpu.name} more than "
               f"{cpu.lane_name}: moving it to the device)")
    return False, f"numeric but {estimated}: {why}; stays on {cpu.lane_name} ({models})"


def describe_part(part: Part, parts: dict[str, Part]) -> str:
    """'triton runs Aggregate [...] (over a part on polars)': one GPU part, for explain; `parts` by key."""
    below = [parts[key] for key in reads(part.plan)]
    over = f" (over {len(below)} part{'s' if len(below) > 1 else ''} on {', '.join(sorted({b.lane_name for b in below}))})"
    return f"{part.lane_name} runs {node_label(part.plan)}" + (over if below else "")


def _logic(plan: N.Node, survey: _Survey, notes: list[str]) -> Decision | None:
    if opaque(plan):
        free = [l for l in survey.of_kind("free") if not l.python_steps_only]
        if free:
            return _finish(plan, survey, free[0], 5, "opaque Python functions: the free lane", notes)
        notes.append("rule 5: the plan calls opaque Python functions, but no free lane is available")
    vector = survey.of_kind("vector")
    if vector:
        estimates = {lane.name: lane.estimate(plan) for lane in vector}
        costed = [(est.seconds, lane) for lane in vector if (est := estimates[lane.name]) is not None]
        chosen = min(costed, key=lambda p: p[0])[1] if costed else vector[0]
        reason = "relational plan: the vector lane"
        why_not: dict[str, str] = {}
        if len(costed) > 1:
            reason += "; cost model: " + ", ".join(f"{l.name} {s:.3g} s" for s, l in sorted(costed, key=lambda p: p[0]))
            chosen_basis = estimates[chosen.name].basis
            if chosen_basis:
                reason += f" ({chosen_basis})"
            for s, lane in costed:
                if lane is not chosen:
                    why_not[lane.name] = f"cost model: {s:.3g} s vs {estimates[chosen.name].seconds:.3g} s for {chosen.name}"
        return _finish(plan, survey, chosen, 5, reason, notes, why_not)
    others = [l for l in survey.capable if l.kind != "reference"]
    if others:
        return _finish(plan, survey, others[0], 5, f"no vector lane can run it; {others[0].kind} lane", notes)
    ref = survey.of_kind("reference")
    if ref:
        return _finish(plan, survey, ref[0], 5,
                       "no vector lane can run it, so the reference lane (pure Python, the oracle) does", notes)
    return None


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"


def render(decision: Decision) -> str:
    """explain() text: lane and rule, rejected lanes with why, notes, then the optimized plan."""
    lines = [f"lane: {decision.lane_name}   (rule {decision.rule}, {RULES[decision.rule]}: {decision.reason})"]
    if decision.rejected:
        width = max(len(name) for name, _ in decision.rejected)
        lines.append("rejected:")
        lines += [f"  {name.ljust(width)}  {why}" for name, why in decision.rejected]
    lines += [f"note: {n}" for n in decision.notes]
    if decision.parts:
        lines.append("parts:")
        lines += part_tree(decision, "  ")
    lines.append("plan:")
    lines.append(tree(decision.plan, "  "))
    lines += decision.lane.describe(decision.plan)
    lines += dict.fromkeys(line for p in decision.parts for line in p.lane.describe(p.plan))
    return "\n".join(lines)


def part_tree(decision: Decision, indent: str = "") -> list[str]:
    """The parts of a split plan as a tree, one a line: the lane that finishes the plan, then under
    each plan the parts it reads, with each part's lane, rule and reason."""
    parts = {p.key: p for p in decision.parts}
    lines = [f"{indent}finish: {decision.lane_name}"]

    def visit(plan: N.Node, depth: int) -> None:
        for key in reads(plan):
            part = parts[key]
            d = part.decision
            lines.append(f"{indent}{'  ' * depth}part {key}: {d.lane_name}   (rule {d.rule}, {RULES[d.rule]}: {d.reason})")
            visit(part.plan, depth + 1)

    visit(decision.plan, 1)
    return lines


def explain(plan: N.Node, engine: str | None = None, *, address: str | None = None) -> str:
    return render(decide(plan, engine, address=address))
