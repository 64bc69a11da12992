"""Splitting a plan into parts, before the planner decides each part.

A split plan is a tree of parts. The plan that finishes the work reads each part below it through
a Scan of a `PartSource` (the part's key); a part's own plan may read parts below it the same way.
Plans are cut first by data locality (`by_locality`: the largest subtrees whose sources all live
in one database that some lane there can run) and then by device (`by_device`: the largest
subtrees of numeric work a GPU lane can run and that pay there, with the inputs it cannot run as
CPU parts inside them). Parts are numbered in the order they are cut. Cutting chooses no lane:
the planner decides each part by the five rules, and the runner hands each part's result on
through a handle (eidos.hal.results).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from eidos.hal.lane import Lane
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.schema import Schema
from eidos.ir.sources import LOCAL, PartSource

if TYPE_CHECKING:
    from eidos.hal.planner import Decision

LOCALITY, DEVICE = "locality", "device"


@dataclass(frozen=True)
class Part:
    """One piece of a split plan: its subplan, what cut it (`by`: locality or device) and where
    (`place`: the database its sources live in, or the device: "gpu", "cpu"), what the cut found
    (`why`), and once the planner has decided it, its `decision` (lane, rule, reason)."""

    key: str
    plan: N.Node
    by: str
    place: str
    why: str = ""
    decision: Decision | None = None

    @property
    def lane(self) -> Lane:
        return self.decision.lane

    @property
    def lane_name(self) -> str:
        return self.decision.lane.name

    @property
    def inputs(self) -> list[str]:
        """The keys of the parts this part's plan reads."""
        return reads(self.plan)


def reads(plan: N.Node) -> list[str]:
    """The keys of the parts `plan` reads directly (not those below them)."""
    return [n.source.key for n in plan.walk() if isinstance(n, N.Scan) and isinstance(n.source, PartSource)]


class Cuts:
    """The parts cut from one plan, numbered 1, 2, ... in the order they were cut. A cut that is
    given up (a region that does not pay on the GPU) is dropped with every part cut inside it, so
    the numbers have no gaps."""

    def __init__(self) -> None:
        self.parts: dict[str, Part] = {}

    def cut(self, plan: N.Node, by: str, place: str, why: str = "") -> N.Scan:
        """A Scan of the result of `plan`, recorded as a part."""
        key = str(len(self.parts) + 1)
        self.parts[key] = Part(key, plan, by, place, why)
        return N.Scan(PartSource(plan.schema, key=key, plan=plan))

    def mark(self) -> int:
        return len(self.parts)

    def drop(self, mark: int) -> None:
        """Forget the parts cut since `mark`."""
        for key in list(self.parts)[mark:]:
            del self.parts[key]

    def decide(self, key: str, decision: Decision) -> None:
        self.parts[key] = replace(self.parts[key], decision=decision)

    def read_by(self, plan: N.Node) -> list[Part]:
        """The parts `plan` reads, at any depth, each before the parts it reads."""
        found: list[Part] = []
        for key in reads(plan):
            found.append(self.parts[key])
            found += self.read_by(self.parts[key].plan)
        return found


def places(plan: N.Node) -> set[str]:
    """Where the sources of `plan` live: 'local' and the databases."""
    return {n.source.location for n in plan.walk() if isinstance(n, N.Scan)}


def by_locality(plan: N.Node, cuts: Cuts, runs_there: Callable[[N.Node], bool]) -> N.Node:
    """Cut out the largest subtrees whose sources all live in one database and that `runs_there`
    (some lane reading that database can run it); each becomes a Scan of its result."""

    def visit(node: N.Node) -> N.Node:
        where = places(node)
        if len(where) == 1 and LOCAL not in where and runs_there(node):
            return cuts.cut(node, LOCALITY, next(iter(where)))
        return map_inputs(node, visit)

    return visit(plan)


def by_device(plan: N.Node, gpu: Lane, cuts: Cuts,
              pays: Callable[[N.Node], tuple[bool, str]] = lambda part: (True, "")) -> N.Node:
    """Cut out the largest subtrees of numeric map work `gpu` can run (each with at least one node that
    computes something) and that `pays` accepts, as GPU parts; an input of such a subtree that `gpu`
    cannot run becomes a CPU part inside it (reading only the columns the GPU part uses)."""

    def runs_here(node: N.Node) -> bool:
        stub = map_inputs(node, lambda c: N.Scan(PartSource(read_by(node, c), plan=c)))
        return not gpu.supports(stub)

    def computes(node: N.Node) -> bool:
        if isinstance(node, (N.Filter, N.Aggregate)):
            return True
        if isinstance(node, N.Project) and any(not isinstance(E.strip_alias(e), E.Column) for _, e in node.columns):
            return True
        return any(runs_here(c) and computes(c) for c in node.inputs)

    def region(node: N.Node) -> N.Node:
        def child(c: N.Node) -> N.Node:
            if runs_here(c):
                return region(c)
            inner = visit(c)
            schema = read_by(node, c)
            if list(schema.names) != list(inner.schema.names):
                inner = N.Project(inner, tuple((name, E.Column(name)) for name in schema.names))
            return cuts.cut(inner, DEVICE, "cpu")
        return map_inputs(node, child)

    def visit(node: N.Node) -> N.Node:
        if not isinstance(node, N.Scan) and runs_here(node) and computes(node):
            mark = cuts.mark()
            cut = region(node)
            ok, why = pays(cut)
            if not ok:   # nor does a smaller region of it: look only below its CPU inputs
                cuts.drop(mark)
                return skip(node)
            return cuts.cut(cut, DEVICE, "gpu", why)
        return map_inputs(node, visit)

    def skip(node: N.Node) -> N.Node:
        return map_inputs(node, lambda c: skip(c) if runs_here(c) else visit(c))

    return visit(plan)


def read_by(node: N.Node, child: N.Node) -> Schema:
    """The columns of `child` that `node` reads (all of them for nodes that pass rows on whole)."""
    if isinstance(node, (N.Project, N.Aggregate)):
        used = set().union(*(e.columns() for e in node.expressions())) if node.expressions() else set()
        used = used or set(child.schema.names[:1])   # a row count needs one column to carry the rows
        return Schema([(n, t) for n, t in child.schema.items() if n in used])
    return child.schema
