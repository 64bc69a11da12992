"""Generated plans (eidos.testing.strategies) with Python functions put anywhere in them: subexpressions
of projections, filters, sort keys, group keys and aggregations' arguments, under when/then too,
wrapped in an identity udf. Run with engine="python" (the functions on the python lane, two workers,
batches of two rows; the rest where rule 5 puts it), each gives the reference lane's answer, or
fails where it fails."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import eidos as ei
from eidos.errors import EidosError, ExecutionError
from eidos.hal import registry
from eidos.hal.parts import opaque
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.typing import infer
from eidos.ir.validate import infer_schema
from eidos.testing.compare import assert_tables_equal
from eidos.testing.strategies import flows, profile
from tests.lanes.helpers import lane_or_skip
from tests.lanes.python_native.udfs import identity


def wrapped(plan: N.Node, wrap) -> N.Node:
    """`plan` with the subexpressions `wrap(expr)` picks wrapped in an identity udf of their type."""

    def maybe(x: E.Expr, schema) -> E.Expr:
        if isinstance(x, (E.Literal, E.Alias, E.Agg)) or not wrap(x):
            return x
        try:
            dtype = infer(x, schema)
        except EidosError:   # an aggregation's outer expression, a computed key's name
            return x
        return x if dtype == T.Null else E.Udf(identity, dtype, (x,))

    def exprs(e: E.Expr, schema) -> E.Expr:
        return E.transform(e, lambda x: maybe(x, schema))

    def visit(node: N.Node) -> N.Node:
        node = map_inputs(node, visit)
        if isinstance(node, N.Project):
            return N.Project(node.input, tuple((n, exprs(e, node.input.schema)) for n, e in node.columns))
        if isinstance(node, N.Filter):
            return N.Filter(node.input, exprs(node.predicate, node.input.schema))
        if isinstance(node, N.Sort):
            return N.Sort(node.input, tuple(N.SortKey(exprs(k.expr, node.input.schema), k.descending, k.nulls_last)
                                            for k in node.keys))
        if isinstance(node, N.Aggregate):
            schema = node.input.schema
            return N.Aggregate(node.input, tuple((n, exprs(e, schema)) for n, e in node.keys),
                               tuple((n, exprs(e, schema)) for n, e in node.aggs))
        return node

    return visit(plan)


@profile()
@given(data=st.data())
def test_generated_plans_with_python_functions_anywhere(data):
    original = lane_or_skip("python")
    from eidos.lanes.python_native import FreeLane

    ei.register_backend("python", FreeLane(workers=2, batch_rows=2))
    try:
        gen = data.draw(flows(), label="generated")
        chance = data.draw(st.sampled_from([0.2, 0.5]), label="wrap chance")
        try:
            plan = wrapped(gen.flow.plan, lambda x: data.draw(st.floats(0, 1)) < chance)
            infer_schema(plan)
        except EidosError:
            assume(False)
        flow = ei.Flow(plan)
        assume(opaque(flow.plan.optimized))   # a udf whose column no one reads is pruned: none left to run
        try:
            expected = flow.run(engine="reference")
        except ExecutionError:
            with pytest.raises(EidosError):
                flow.run(engine="python", strict=True)
            return
        assert_tables_equal(flow.run(engine="python", strict=True), expected, ordered=gen.ordered, float_rel=1e-6)
    finally:
        registry.register_backend("python", original)
