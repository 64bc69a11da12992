"""What a lane covers, as data; `gaps(plan)` lists everything in a plan a lane lacks.

Like Ibis's operation tables: the planner knows before running what a lane
cannot do, and explain() names it. Each translator says what it has a rule for
(`translated()`, read from its own registries); a test holds every lane's table
to it, and `markdown()` writes the support matrix, docs/coverage.md.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import cached_property

from eidos.hal.memo import once
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import functions as F
from eidos.ir import nodes as N

# Literal values a lane may be unable to hold (SQLite has no NaN), named as coverage tables list them.
SPECIAL_VALUES = ("NaN",)

# Expression forms that are not Calls, under the pseudo-function names coverage tables list (F.FORMS).
FORMS = {E.Case: "case", E.Cast: "cast", E.Udf: "udf", E.Window: "over"}


@dataclass(frozen=True)
class Coverage:
    """Supported IR node names, function names (incl. forms 'case', 'cast', 'udf'), dtype kinds and
    join kinds, special literal values ('NaN'); `typed_gaps` are fnmatch patterns of operations on particular types that a lane
    cannot compute exactly, such as "mod Float*" or "cast String->*" (see `typed_operations`)."""

    nodes: frozenset[str]
    functions: frozenset[str]
    dtypes: frozenset[str]
    joins: frozenset[str] = frozenset(N.JOIN_KINDS)
    typed_gaps: tuple[str, ...] = ()
    values: frozenset[str] = frozenset(SPECIAL_VALUES)

    @classmethod
    def everything(cls) -> Coverage:
        return cls(frozenset(t.__name__ for t in N.NODE_TYPES), frozenset(F.ALL), frozenset(T.KINDS))

    def without(self, *, nodes=(), functions=(), dtypes=(), joins=(), typed=(), values=()) -> Coverage:
        """A copy lacking the given names: lanes describe themselves as 'everything but ...'."""
        return Coverage(self.nodes - set(nodes), self.functions - set(functions),
                        self.dtypes - set(dtypes), self.joins - set(joins),
                        tuple(dict.fromkeys(self.typed_gaps + tuple(typed))), self.values - set(values))

    def untranslated(self, translated: Coverage) -> list[str]:
        """What this table declares that a translator (its `translated()`) has no rule for."""
        return ([f"node {n}" for n in sorted(self.nodes - translated.nodes)]
                + [f"function {f}" for f in sorted(self.functions - translated.functions)]
                + [f"dtype {t}" for t in sorted(self.dtypes - translated.dtypes)])

    @cached_property
    def _typed_pattern(self) -> re.Pattern | None:
        if not self.typed_gaps:
            return None
        return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in self.typed_gaps))

    def gaps(self, plan: N.Node) -> list[str]:
        """Every unsupported node, join kind, dtype, function and typed operation in the plan, each
        named once. What the plan needs is collected once per plan (`needs`), whichever lane asks."""
        have = {"node": self.nodes, "join": self.joins, "dtype": self.dtypes, "function": self.functions,
                "value": self.values}
        found = [label for kind, name, label in needs(plan).items if name not in have[kind]]
        pattern = self._typed_pattern
        if pattern is not None:
            found += [name for name in needs(plan).typed if pattern.match(name)]
        return found


@dataclass(frozen=True)
class Needs:
    """What a plan needs of a lane: (kind, name, label) in plan order, and its typed operations."""

    items: tuple[tuple[str, str, str], ...]
    typed: tuple[str, ...]


def needs(plan: N.Node) -> Needs:
    """The plan's nodes, join kinds, dtypes, functions and typed operations, computed once per plan
    (eidos.hal.memo) so each lane's check is set lookups."""
    return once(plan, "coverage.needs", lambda: _collect(plan))


def _collect(plan: N.Node) -> Needs:
    items: dict[tuple[str, str, str], None] = {}
    typed: dict[str, None] = {}
    for node in plan.walk():
        kind = type(node).__name__
        items[("node", kind, f"node {kind}")] = None
        if isinstance(node, N.Join):
            items[("join", node.how, f"{node.how} join")] = None
        for _, dtype in node.schema.items():
            for kind in dtype.kinds:
                items[("dtype", kind, f"dtype {kind}")] = None
        for expr in node.expressions():
            for fn in functions_used(expr):
                items[("function", fn, f"function {fn}")] = None
            for value in special_values(expr):
                items[("value", value, f"{value} literal")] = None
        if node.inputs:
            schema = _input_schema(node)
            for expr in node.expressions():
                for sub in expr.walk():
                    typed.update(dict.fromkeys(typed_operations(sub, schema)))
    return Needs(tuple(items), tuple(typed))


def _input_schema(node: N.Node):
    """The schema a node's expressions read: its input's, plus an Aggregate's computed keys."""
    from eidos.ir.schema import Schema
    from eidos.ir.typing import infer

    schema = node.inputs[0].schema
    if isinstance(node, N.Aggregate):
        extra = [(n, infer(e, schema)) for n, e in node.keys if n not in schema]
        if extra:
            schema = Schema(list(schema.items()) + extra)
    return schema


def typed_operations(e: E.Expr, schema) -> list[str]:
    """Names of `e` with the types it computes in, for typed gap patterns: "cast String->Date",
    "add Decimal(15,2)" (its result and, for two operands, their common type), "sum Float64"."""
    from eidos.errors import PlanError
    from eidos.ir.typing import infer, operand_dtypes, promote

    try:
        if isinstance(e, E.Cast):
            return [f"cast {infer(e.expr, schema, allow_agg=True)}->{e.dtype}"]
        if isinstance(e, E.Call) and not any(E.contains_agg(a) for a in e.args):
            ts = operand_dtypes(e, schema)
            kinds = {str(infer(e, schema))}
            if len(ts) == 2:
                try:
                    kinds.add(str(promote(*ts)))
                except PlanError:
                    kinds.update(str(t) for t in ts)
            else:
                kinds.update(str(t) for t in ts[:1])
            return [f"{e.fn} {k}" for k in sorted(kinds)]
        if isinstance(e, E.Agg) and e.arg is not None:
            return [f"{e.fn} {infer(e.arg, schema)}"]
        if isinstance(e, E.Window) and e.args:   # "over sum Float64" for an aggregation, "cum_sum Float64"
            return [f"{'over ' if e.fn in F.AGGREGATES else ''}{e.fn} {infer(e.args[0], schema)}"]
    except PlanError:  # a sub-expression typed only in context (inside an aggregation); the whole is checked
        return []
    return []


def special_values(expr: E.Expr) -> list[str]:
    """The special literal values an expression holds (a float NaN, in a literal or an is_in list)."""
    def nan(v) -> bool:
        return isinstance(v, float) and v != v

    out = []
    for e in expr.walk():
        if isinstance(e, E.Literal) and nan(e.value):
            out.append("NaN")
        elif isinstance(e, E.Call) and e.fn == "is_in" and any(nan(v) for v in (e.options[0] if e.options else ())):
            out.append("NaN")
    return out


def functions_used(expr: E.Expr) -> list[str]:
    """The coverage names an expression uses (Call fns, Agg fns, and the forms case/cast/udf)."""
    out = []
    for e in expr.walk():
        if isinstance(e, E.Window) and e.fn in F.AGGREGATES:
            out += ["over", e.fn]
        elif isinstance(e, (E.Call, E.Agg, E.Window)):
            out.append(e.fn)
        elif type(e) in FORMS:
            out.append(FORMS[type(e)])
    return out


# ---------------------------------------------------------------- what translators translate

def dispatched(visitor, base: type) -> frozenset[str]:
    """The names of the `base` classes a singledispatch visitor has a rule for (its registry)."""
    return frozenset(cls.__name__ for cls in visitor.registry if cls is not base and issubclass(cls, base))


def forms(visitor) -> frozenset[str]:
    """The expression forms (case, cast, udf) an expression visitor has a rule for."""
    return frozenset(name for cls, name in FORMS.items() if cls in visitor.registry)


# ---------------------------------------------------------------- the support matrix (docs/coverage.md)

REGENERATE = "python -c \"from eidos.hal.coverage import markdown; print(markdown(), end='')\" > docs/coverage.md"

_FAMILIES = {"arithmetic": F.ARITHMETIC, "comparison": F.COMPARISON, "logic": F.LOGICAL, "math": F.MATH,
             "nulls": F.NULLS, "membership": F.MEMBERSHIP, "text": F.STRINGS, "dates": F.TEMPORAL, "lists": F.LISTS, "binary": F.BINARY, "structs": F.STRUCTS,
             "aggregation": F.AGGREGATES, "window": F.WINDOWS, "form": F.FORMS}


def builtin_lanes() -> list:
    """The lanes eidos ships (registered ones defined under eidos.lanes), by kind (KINDS order), then name."""
    from eidos.hal import registry
    from eidos.hal.lane import KINDS

    ours = [lane for lane in registry.lanes() if type(lane).__module__.startswith("eidos.lanes.")]
    return sorted(ours, key=lambda lane: (KINDS.index(lane.kind), lane.name))


def markdown(lanes: list | None = None) -> str:
    """docs/coverage.md: for each lane (the built-in ones by default), every node, function, dtype,
    join kind and special value of the IR, the operations it cannot compute exactly on particular
    types, and what its coverage module says about the rest."""
    import importlib
    import inspect

    lanes = builtin_lanes() if lanes is None else lanes

    def matrix(heads: tuple[str, ...], rows: list[tuple[str, ...]], covered) -> list[str]:
        """A table of `rows` (the name first), one column per lane: ✓ where `covered(its coverage, name)`."""
        out = ["", "| " + " | ".join(heads + tuple(lane.name for lane in lanes)) + " |",
               "|" + " --- |" * len(heads) + " :-: |" * len(lanes)]
        for row in rows:
            marks = tuple("✓" if covered(lane.coverage, row[0]) else "" for lane in lanes)
            out.append("| " + " | ".join(row + marks) + " |")
        return out

    lines = ["# What each lane covers", "",
             "<!-- Generated from the lanes' coverage tables by eidos.hal.coverage.markdown(); do not edit.",
             "     tests/hal/test_coverage.py fails when it is out of date. Regenerate with:",
             f"     {REGENERATE} -->", "",
             "A lane runs a plan only when it covers everything the plan holds: the planner checks before",
             "running, and `flow.explain()` names what each lane it passed over lacks. A test holds each",
             "lane's table to what its translator has a rule for. ✓: covered."]
    lines += ["", "## Plan nodes"]
    lines += matrix(("node",), [(t.__name__,) for t in N.NODE_TYPES], lambda c, n: n in c.nodes)
    lines += ["", "## Functions", "",
              "Scalar functions, aggregations, window functions, and the expression forms when/then (`case`), `cast`, `udf` "
              "and `over` (an aggregation over a window)."]
    lines += matrix(("function", "family"), [(fn, family) for family, fns in _FAMILIES.items() for fn in fns],
                    lambda c, fn: fn in c.functions)
    lines += ["", "## Types"]
    lines += matrix(("dtype",), [(k,) for k in T.KINDS], lambda c, k: k in c.dtypes)
    lines += ["", "## Join kinds"]
    lines += matrix(("join",), [(k,) for k in N.JOIN_KINDS], lambda c, k: k in c.joins)
    lines += ["", "## Special literal values"]
    lines += matrix(("value",), [(v,) for v in SPECIAL_VALUES], lambda c, v: v in c.values)
    lines += ["", "## Operations not computed exactly on particular types", "",
              "Patterns (`fnmatch`) of an operation and the types it computes in; a plan holding one runs elsewhere.",
              ""]
    for lane in lanes:
        gaps = ", ".join(f"`{p}`" for p in lane.coverage.typed_gaps) or "none"
        lines.append(f"- {lane.name}: {gaps}")
    lines += ["", "## Notes from the lanes' coverage modules"]
    seen: dict[str, list[str]] = {}
    for lane in lanes:
        seen.setdefault(type(lane).__module__ + ".coverage", []).append(lane.name)
    for module, owners in seen.items():
        doc = inspect.cleandoc(importlib.import_module(module).__doc__ or "")
        lines += ["", f"### {', '.join(owners)} (`{module}`)", "", doc]
    return "\n".join(lines) + "\n"
