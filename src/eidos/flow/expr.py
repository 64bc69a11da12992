"""Expression builders: `col`, `lit`, `when`, `count`, `date`, `udf` and the `Expr` wrapper.

`Expr` wraps an immutable IR expression and overloads Python operators to
build bigger ones. Nothing here evaluates anything.
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Callable, Iterable
from typing import Any

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import functions as F
from eidos.ir.durations import parse_duration
from eidos.ir.typing import convert_literal, literal_dtype

_NO_DEFAULT = object()


def to_ir(value: Any) -> E.Expr:
    """An IR expression from an Expr or a Python value (a bare value is a literal)."""
    if isinstance(value, Expr):
        return value.node
    if isinstance(value, E.Expr):
        return value
    return lit(value).node


def name_or_expr(value: Any) -> E.Expr:
    """Where a Flow method takes columns: a str names a column, anything else is an expression."""
    if isinstance(value, str):
        return E.Column(value)
    if isinstance(value, (Expr, E.Expr)):
        return to_ir(value)
    raise PlanError(f"expected a column name or an expression, got {type(value).__name__} {value!r}")


class Expr:
    """A column expression. Build with operators and methods; evaluate by running a Flow.

    Operators build expressions: `+ - * / // % **`, unary `-`, `== != < <= > >=`, and `& | ~` for
    logical and, or, not (Python's `and`/`or`/`not` cannot be overloaded, so they raise).

    Examples:
        >>> flow = ei.from_pydict({"a": [1, 2, 3], "b": [10, 20, 30]})
        >>> flow.select((col("a") * 2 + col("b")).alias("c"), big=(col("b") > 15) & ~(col("a") == 3)).run().to_pydict()
        {'c': [12, 24, 36], 'big': [False, True, False]}
    """

    __slots__ = ("node",)
    __hash__ = None  # == builds an expression, so Exprs are not dict keys

    def __init__(self, node: E.Expr):
        self.node = node

    def __repr__(self) -> str:
        return f"<Expr {self.node}>"

    def __bool__(self) -> bool:
        raise PlanError(f"the truth value of expression {self.node} is not known until the plan runs; "
                        "use & | ~ instead of and / or / not, and .is_between() instead of a < x < b")

    def _call(self, fn: str, *args: Any, options: tuple = ()) -> Expr:
        return Expr(E.Call(fn, (self.node,) + tuple(to_ir(a) for a in args), options))

    def _rcall(self, fn: str, other: Any) -> Expr:
        return Expr(E.Call(fn, (to_ir(other), self.node)))

    # arithmetic
    def __add__(self, o): return self._call("add", o)
    def __radd__(self, o): return self._rcall("add", o)
    def __sub__(self, o): return self._call("sub", o)
    def __rsub__(self, o): return self._rcall("sub", o)
    def __mul__(self, o): return self._call("mul", o)
    def __rmul__(self, o): return self._rcall("mul", o)
    def __truediv__(self, o): return self._call("truediv", o)
    def __rtruediv__(self, o): return self._rcall("truediv", o)
    def __floordiv__(self, o): return self._call("floordiv", o)
    def __rfloordiv__(self, o): return self._rcall("floordiv", o)
    def __mod__(self, o): return self._call("mod", o)
    def __rmod__(self, o): return self._rcall("mod", o)
    def __pow__(self, o): return self._call("pow", o)
    def __rpow__(self, o): return self._rcall("pow", o)
    def __neg__(self): return self._call("neg")
    def __pos__(self): return self

    # comparison
    def __eq__(self, o): return self._call("eq", o)  # type: ignore[override]
    def __ne__(self, o): return self._call("ne", o)  # type: ignore[override]
    def __lt__(self, o): return self._call("lt", o)
    def __le__(self, o): return self._call("le", o)
    def __gt__(self, o): return self._call("gt", o)
    def __ge__(self, o): return self._call("ge", o)

    # logic
    def __and__(self, o): return self._call("and", o)
    def __rand__(self, o): return self._rcall("and", o)
    def __or__(self, o): return self._call("or", o)
    def __ror__(self, o): return self._rcall("or", o)
    def __invert__(self): return self._call("not")

    # naming and types
    def alias(self, name: str) -> Expr:
        """The same expression under the output column name `name`.

        Examples:
            >>> ei.from_pydict({"a": [1, 2]}).select((col("a") + 1).alias("b")).run().to_pydict()
            {'b': [2, 3]}
        """
        if not isinstance(name, str) or not name:
            raise PlanError(f"alias needs a non-empty column name, got {name!r}")
        return Expr(E.Alias(self.node, name))

    def cast(self, dtype: Any) -> Expr:
        """The value converted to `dtype` (an eidos dtype such as `ei.Float64`, or its name).

        Examples:
            >>> flow = ei.from_pydict({"a": [1, 2]}).select(col("a").cast(ei.Float64))
            >>> flow.schema
            Schema(a: Float64)
            >>> flow.run().to_pydict()
            {'a': [1.0, 2.0]}
        """
        return Expr(E.Cast(self.node, T.coerce(dtype)))

    # nulls and membership
    def is_null(self) -> Expr:
        """True where the value is null.

        Examples:
            >>> ei.from_pydict({"a": [1, None]}).select(col("a").is_null()).run().to_pydict()
            {'a': [False, True]}
        """
        return self._call("is_null")

    def is_not_null(self) -> Expr:
        """True where the value is not null.

        Examples:
            >>> ei.from_pydict({"a": [1, None]}).select(col("a").is_not_null()).run().to_pydict()
            {'a': [True, False]}
        """
        return self._call("is_not_null")

    def fill_null(self, value: Any) -> Expr:
        """The value, or `value` (a literal or an expression) where it is null.

        Examples:
            >>> ei.from_pydict({"a": [1, None]}).select(col("a").fill_null(0)).run().to_pydict()
            {'a': [1, 0]}
        """
        return self._call("fill_null", value)

    def is_in(self, values: Iterable[Any]) -> Expr:
        """True where the value equals one of `values` (a list of literals).

        Examples:
            >>> ei.from_pydict({"a": ["x", "y", "z"]}).filter(col("a").is_in(["x", "z"])).run().to_pydict()
            {'a': ['x', 'z']}
        """
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise PlanError(f"is_in takes a list of values, got {values!r}")
        values = tuple(values)
        for v in values:
            literal_dtype(v)
        return self._call("is_in", options=(values,))

    def is_between(self, lower: Any, upper: Any) -> Expr:
        """True where `lower <= value <= upper` (both ends included).

        Examples:
            >>> ei.from_pydict({"a": [1, 2, 3, 4]}).filter(col("a").is_between(2, 3)).run().to_pydict()
            {'a': [2, 3]}
        """
        return self._call("is_between", lower, upper)

    # math
    def abs(self) -> Expr:
        """The absolute value.

        Examples:
            >>> ei.from_pydict({"a": [-1.5, 2.0]}).select(col("a").abs()).run().to_pydict()
            {'a': [1.5, 2.0]}
        """
        return self._call("abs")

    def sqrt(self) -> Expr:
        """The square root (a Float64).

        Examples:
            >>> ei.from_pydict({"a": [4, 9]}).select(col("a").sqrt()).run().to_pydict()
            {'a': [2.0, 3.0]}
        """
        return self._call("sqrt")

    def exp(self) -> Expr:
        """e raised to the value.

        Examples:
            >>> ei.from_pydict({"a": [0.0, 1.0]}).select(col("a").exp().round(4)).run().to_pydict()
            {'a': [1.0, 2.7183]}
        """
        return self._call("exp")

    def log(self, base: float | None = None) -> Expr:
        """The logarithm: natural without `base`; with it, `log(x) / log(base)` (base 10 is `log10`).

        Examples:
            >>> ei.from_pydict({"a": [1.0, 10.0]}).select(col("a").log().round(4)).run().to_pydict()
            {'a': [0.0, 2.3026]}
            >>> ei.from_pydict({"a": [1, 8]}).select(col("a").log(2)).run().to_pydict()
            {'a': [0.0, 3.0]}
        """
        if base is None:
            return self._call("log")
        if isinstance(base, bool) or not isinstance(base, (int, float)):
            raise PlanError(f"log(base) takes a number, got {base!r}")
        if base == 10:
            return self.log10()
        return self._call("log") / lit(float(base)).log()

    def log10(self) -> Expr:
        """The base-10 logarithm.

        Examples:
            >>> ei.from_pydict({"a": [1, 1000]}).select(col("a").log10()).run().to_pydict()
            {'a': [0.0, 3.0]}
        """
        return self._call("log10")

    def pow(self, exponent: Any) -> Expr:
        """The value raised to `exponent`: the same as `**`.

        Examples:
            >>> ei.from_pydict({"a": [2, 3]}).select(col("a").pow(2)).run().to_pydict()
            {'a': [4.0, 9.0]}
        """
        return self._call("pow", exponent)

    def clip(self, lower_bound: Any = None, upper_bound: Any = None) -> Expr:
        """The value limited to `lower_bound..upper_bound` (literals or expressions; None or a null bound: no limit).

        Examples:
            >>> ei.from_pydict({"a": [-5, 3, 12, None]}).select(col("a").clip(0, 10)).run().to_pydict()
            {'a': [0, 3, 10, None]}
        """
        if lower_bound is None and upper_bound is None:
            return self
        branches: tuple = ()
        if lower_bound is not None:
            branches += ((E.Call("lt", (self.node, to_ir(lower_bound))), to_ir(lower_bound)),)
        if upper_bound is not None:
            branches += ((E.Call("gt", (self.node, to_ir(upper_bound))), to_ir(upper_bound)),)
        return Expr(E.Case(branches, self.node))

    def replace(self, mapping: dict, *, default: Any = _NO_DEFAULT) -> Expr:
        """Each value that is a key of `mapping` replaced by its value; the others kept, or `default`.

        A None key replaces nulls. As Polars' `replace`, or `replace_strict(default=...)` with `default`.

        Examples:
            >>> flow = ei.from_pydict({"a": ["x", "y", None]})
            >>> flow.select(col("a").replace({"x": "ex", None: "?"})).run().to_pydict()
            {'a': ['ex', 'y', '?']}
            >>> flow.select(col("a").replace({"x": 1}, default=0)).run().to_pydict()
            {'a': [1, 0, 0]}
        """
        if not isinstance(mapping, dict):
            raise PlanError(f"replace takes a dict of old value -> new value, got {mapping!r}")
        if not mapping:
            if default is _NO_DEFAULT:
                return self
            return Expr(E.Case(((E.Literal(False, T.Boolean), self.node),), to_ir(default)))
        branches = tuple((E.Call("is_null", (self.node,)) if k is None else E.Call("eq", (self.node, to_ir(k))),
                          to_ir(v)) for k, v in mapping.items())
        return Expr(E.Case(branches, self.node if default is _NO_DEFAULT else to_ir(default)))

    def filter(self, predicate: Any) -> Filtered:
        """The values where `predicate` is true, for an aggregation: `col("x").filter(col("y") > 0).sum()`.

        Examples:
            >>> flow = ei.from_pydict({"x": [1, 2, 3], "y": [-1, 1, 1]})
            >>> flow.agg(pos=col("x").filter(col("y") > 0).sum(), n=col("x").filter(col("y") > 0).count()).run().to_pydict()
            {'pos': [5], 'n': [2]}
        """
        return Filtered(Expr(E.Case(((to_ir(predicate), self.node),), E.Literal(None, T.Null, weak=True))))

    def sin(self) -> Expr:
        """The sine of an angle in radians.

        Examples:
            >>> ei.from_pydict({"a": [0.0, 1.0]}).select(col("a").sin().round(4)).run().to_pydict()
            {'a': [0.0, 0.8415]}
        """
        return self._call("sin")

    def cos(self) -> Expr:
        """The cosine of an angle in radians.

        Examples:
            >>> ei.from_pydict({"a": [0.0, 1.0]}).select(col("a").cos().round(4)).run().to_pydict()
            {'a': [1.0, 0.5403]}
        """
        return self._call("cos")

    def tanh(self) -> Expr:
        """The hyperbolic tangent.

        Examples:
            >>> ei.from_pydict({"a": [0.0, 1.0]}).select(col("a").tanh().round(4)).run().to_pydict()
            {'a': [0.0, 0.7616]}
        """
        return self._call("tanh")

    def floor(self) -> Expr:
        """The largest whole number not above the value.

        Examples:
            >>> ei.from_pydict({"a": [1.5, -1.5]}).select(col("a").floor()).run().to_pydict()
            {'a': [1.0, -2.0]}
        """
        return self._call("floor")

    def ceil(self) -> Expr:
        """The smallest whole number not below the value.

        Examples:
            >>> ei.from_pydict({"a": [1.5, -1.5]}).select(col("a").ceil()).run().to_pydict()
            {'a': [2.0, -1.0]}
        """
        return self._call("ceil")

    def round(self, decimals: int = 0) -> Expr:
        """The value rounded to `decimals` places, halves away from zero.

        Examples:
            >>> ei.from_pydict({"a": [1.25, 2.5, -2.5]}).select(col("a").round(1)).run().to_pydict()
            {'a': [1.3, 2.5, -2.5]}
        """
        if not isinstance(decimals, int) or isinstance(decimals, bool):
            raise PlanError(f"round(decimals) takes an integer, got {decimals!r}")
        return self._call("round", options=(decimals,))

    # aggregations
    def _agg(self, fn: str) -> Expr: return Expr(E.Agg(fn, self.node))

    def sum(self) -> Expr:
        """The sum of the non-null values (in each group); an aggregation for `agg`.

        Examples:
            >>> ei.from_pydict({"a": [1, 2, None]}).agg(col("a").sum()).run().to_pydict()
            {'a': [3]}
        """
        return self._agg("sum")

    def mean(self) -> Expr:
        """The mean of the non-null values (in each group).

        Examples:
            >>> ei.from_pydict({"a": [1, 2, None]}).agg(col("a").mean()).run().to_pydict()
            {'a': [1.5]}
        """
        return self._agg("mean")

    def min(self) -> Expr:
        """The smallest non-null value (in each group).

        Examples:
            >>> ei.from_pydict({"a": [3, 1, 2]}).agg(col("a").min()).run().to_pydict()
            {'a': [1]}
        """
        return self._agg("min")

    def max(self) -> Expr:
        """The largest non-null value (in each group).

        Examples:
            >>> ei.from_pydict({"a": [3, 1, 2]}).agg(col("a").max()).run().to_pydict()
            {'a': [3]}
        """
        return self._agg("max")

    def count(self) -> Expr:
        """The number of non-null values (in each group); `ei.count()` counts rows.

        Examples:
            >>> ei.from_pydict({"a": [1, None, 3]}).agg(col("a").count(), rows=ei.count()).run().to_pydict()
            {'a': [2], 'rows': [3]}
        """
        return self._agg("count")

    def n_unique(self) -> Expr:
        """The number of distinct non-null values (in each group).

        Examples:
            >>> ei.from_pydict({"a": [1, 1, 2, None]}).agg(col("a").n_unique()).run().to_pydict()
            {'a': [2]}
        """
        return self._agg("n_unique")

    def std(self) -> Expr:
        """The sample standard deviation (n - 1 in the denominator) of the non-null values.

        Examples:
            >>> ei.from_pydict({"a": [1.0, 2.0, 3.0]}).agg(col("a").std()).run().to_pydict()
            {'a': [1.0]}
        """
        return self._agg("std")

    def var(self) -> Expr:
        """The sample variance (n - 1 in the denominator) of the non-null values.

        Examples:
            >>> ei.from_pydict({"a": [1.0, 2.0, 3.0]}).agg(col("a").var()).run().to_pydict()
            {'a': [1.0]}
        """
        return self._agg("var")

    def median(self) -> Expr:
        """The middle of the non-null values in order (NaN largest); of two middle values, their midpoint.

        Examples:
            >>> ei.from_pydict({"a": [1, 10, 2, None, 4]}).agg(col("a").median()).run().to_pydict()
            {'a': [3.0]}
        """
        return self._agg("median")

    def quantile(self, quantile: float, interpolation: str = "nearest") -> Expr:
        """The value at fraction `quantile` of the non-null values in order (NaN largest), as Polars
        places it: position h = (n - 1) * quantile; `interpolation` picks the value at h rounded
        ("nearest", halves away from zero), below it ("lower"), above it ("higher"), their midpoint
        ("midpoint") or the point between them at h ("linear"), exact and rounded once to a Float64.

        Examples:
            >>> flow = ei.from_pydict({"a": [1, 2, 3, 4, None]})
            >>> flow.agg(near=col("a").quantile(0.5), lin=col("a").quantile(0.25, "linear")).run().to_pydict()
            {'near': [3.0], 'lin': [1.75]}
        """
        if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0 <= quantile <= 1:
            raise PlanError(f"quantile takes a fraction from 0 to 1, got {quantile!r}")
        if interpolation not in F.QUANTILE_METHODS:
            raise PlanError(f"quantile interpolation {interpolation!r} is not one of {', '.join(F.QUANTILE_METHODS)}")
        return Expr(E.Agg("quantile", self.node, (float(quantile), interpolation)))

    def first(self) -> Expr:
        """The value (null or not) of the first row of each group, in the rows' order (which the plan
        must define: sort first after a group_by, a join or a distinct).

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "b", "a"], "v": [None, 2, 3]})
            >>> flow.group_by("k").agg(f=col("v").first(), l=col("v").last()).sort("k").run().to_pydict()
            {'k': ['a', 'b'], 'f': [None, 2], 'l': [3, 2]}
        """
        return self._agg("first")

    def last(self) -> Expr:
        """The value (null or not) of the last row of each group, in the rows' order (see `first`).

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "b", "a"], "v": [1, 2, None]})
            >>> flow.group_by("k").agg(l=col("v").last()).sort("k").run().to_pydict()
            {'k': ['a', 'b'], 'l': [None, 2]}
        """
        return self._agg("last")

    def implode(self) -> Expr:
        """Every value of each group (nulls included) as one List, in the rows' order (see `first`);
        an empty list over no rows.

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "b", "a"], "v": [None, 2, 3]})
            >>> flow.group_by("k").agg(vs=col("v").implode()).sort("k").run().to_pydict()
            {'k': ['a', 'b'], 'vs': [[None, 3], [2]]}
        """
        return self._agg("implode")

    def arg_min(self) -> Expr:
        """The position in its group (from 0, counting every row) of the first smallest non-null value,
        in the rows' order; null when every value is null. Int64 (Polars gives UInt32).

        Examples:
            >>> flow = ei.from_pydict({"v": [None, 3.0, 1.0, 1.0, float("nan")]})
            >>> flow.agg(lo=col("v").arg_min(), hi=col("v").arg_max()).run().to_pydict()
            {'lo': [2], 'hi': [4]}
        """
        return self._agg("arg_min")

    def arg_max(self) -> Expr:
        """The position of the first largest non-null value (NaN is the largest, as in sorting; see `arg_min`).

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "a", "b", "a"], "v": [3, 7, 1, 7]})
            >>> flow.group_by("k").agg(hi=col("v").arg_max()).sort("k").run().to_pydict()
            {'k': ['a', 'b'], 'hi': [1, 0]}
        """
        return self._agg("arg_max")

    # windows (docs/semantics.md section 19)
    def over(self, partition_by: Any = None, *more: Any, order_by: Any = None, descending: bool = False,
             nulls_last: bool = False) -> Expr:
        """The aggregations and window functions in this expression computed over windows: for each row, over
        the rows with its `partition_by` values (every row when there are none; nulls group together), in
        `order_by` order, else the flow's row order. An aggregation gives every row of a partition its value.

        Examples:
            >>> flow = ei.from_pydict({"g": ["a", "b", "a"], "x": [1, 2, 3]})
            >>> flow.with_columns(total=col("x").sum().over("g"), share=col("x") / col("x").sum().over("g")).run().to_pydict()
            {'g': ['a', 'b', 'a'], 'x': [1, 2, 3], 'total': [4, 2, 4], 'share': [0.25, 1.0, 0.75]}
            >>> flow.with_columns(running=col("x").cum_sum().over("g", order_by="x")).run().to_pydict()
            {'g': ['a', 'b', 'a'], 'x': [1, 2, 3], 'running': [1, 2, 4]}
        """
        def keys(value: Any, what: str) -> tuple[E.Expr, ...]:
            values = value if isinstance(value, (list, tuple)) else () if value is None else (value,)
            return tuple(E.strip_alias(name_or_expr(v)) for v in values)

        parts = keys(partition_by, "partition_by") + keys(more, "partition_by")
        order = keys(order_by, "order_by")
        for flag, what in ((descending, "descending"), (nulls_last, "nulls_last")):
            if not isinstance(flag, bool):
                raise PlanError(f"over({what}=...) takes True or False, got {flag!r}")
        found = []

        def step(e: E.Expr) -> E.Expr:
            if isinstance(e, E.Agg):
                e = E.Window(e.fn, () if e.arg is None else (e.arg,), options=e.options)
            if isinstance(e, E.Window):
                if e.partition_by or e.order_by:
                    raise PlanError(f"{e} already has over(); give partition_by and order_by in one over()")
                found.append(e)
                return E.Window(e.fn, e.args, parts, order, descending, nulls_last, e.options)
            return e

        out = E.transform(self.node, step)
        if not found:
            raise PlanError(f"over() applies to aggregations and window functions (sum, rank, cum_sum, shift, ...), "
                            f"and {self.node} has none")
        return Expr(out)

    def _window(self, fn: str, *args: Any, options: tuple = ()) -> Expr:
        return Expr(E.Window(fn, (self.node,) + tuple(to_ir(a) for a in args), options=options))

    def rank(self, method: str = "average", *, descending: bool = False) -> Expr:
        """The rank of each value from 1 (in its partition, with `over`): equal values share the `method`'s rank
        ("average", "min", "max", "dense"; "ordinal" numbers them in row order); nulls get null, NaN is largest.
        Integer ranks are Int64 (Polars gives UInt32).

        Examples:
            >>> flow = ei.from_pydict({"g": ["a", "a", "a", "b"], "x": [5, 9, 5, 1]})
            >>> flow.with_columns(r=col("x").rank("min", descending=True).over("g")).run().to_pydict()
            {'g': ['a', 'a', 'a', 'b'], 'x': [5, 9, 5, 1], 'r': [2, 1, 2, 1]}
        """
        if method not in F.RANK_METHODS:
            raise PlanError(f"rank(method={method!r}): the methods are {', '.join(F.RANK_METHODS)}")
        if not isinstance(descending, bool):
            raise PlanError(f"rank(descending=...) takes True or False, got {descending!r}")
        return self._window("rank", options=(method, descending))

    def shift(self, n: int = 1, *, fill_value: Any = None) -> Expr:
        """The value `n` rows before (after, for negative `n`) in window order; `fill_value` (else null) where
        there is none. SQL's `lag(x, n)` is `shift(n)`, `lead(x, n)` is `shift(-n)`.

        Examples:
            >>> ei.from_pydict({"x": [1, 2, 3]}).with_columns(prev=col("x").shift(), nxt=col("x").shift(-1, fill_value=0)).run().to_pydict()
            {'x': [1, 2, 3], 'prev': [None, 1, 2], 'nxt': [2, 3, 0]}
        """
        n = _window_int(n, "shift(n)", -(2**31))
        return self._window("shift", *(() if fill_value is None else (fill_value,)), options=(n,))

    def diff(self, n: int = 1) -> Expr:
        """This value minus the one `n` rows before: `x - x.shift(n)` (null where there is none).

        Examples:
            >>> ei.from_pydict({"x": [1, 4, 9]}).with_columns(d=col("x").diff()).run().to_pydict()
            {'x': [1, 4, 9], 'd': [None, 3, 5]}
        """
        return self - self.shift(_window_int(n, "diff(n)", -(2**31)))

    def cum_sum(self) -> Expr:
        """The sum of the non-null values up to each row in window order (exact, as sum() is); null rows stay null.

        Examples:
            >>> ei.from_pydict({"x": [1, None, 3]}).with_columns(s=col("x").cum_sum()).run().to_pydict()
            {'x': [1, None, 3], 's': [1, None, 4]}
        """
        return self._window("cum_sum")

    def cum_prod(self) -> Expr:
        """The product of the non-null values up to each row in window order; null rows stay null.

        Examples:
            >>> ei.from_pydict({"x": [2, 3, 4]}).with_columns(p=col("x").cum_prod()).run().to_pydict()
            {'x': [2, 3, 4], 'p': [2, 6, 24]}
        """
        return self._window("cum_prod")

    def cum_min(self) -> Expr:
        """The least non-null value up to each row in window order; null rows stay null.

        Examples:
            >>> ei.from_pydict({"x": [3, 1, 2]}).with_columns(m=col("x").cum_min()).run().to_pydict()
            {'x': [3, 1, 2], 'm': [3, 1, 1]}
        """
        return self._window("cum_min")

    def cum_max(self) -> Expr:
        """The greatest non-null value up to each row in window order (NaN largest); null rows stay null.

        Examples:
            >>> ei.from_pydict({"x": [1, 3, 2]}).with_columns(m=col("x").cum_max()).run().to_pydict()
            {'x': [1, 3, 2], 'm': [1, 3, 3]}
        """
        return self._window("cum_max")

    def cum_count(self) -> Expr:
        """The number of non-null values up to each row in window order (every row gets one).

        Examples:
            >>> ei.from_pydict({"x": [5, None, 7]}).with_columns(n=col("x").cum_count()).run().to_pydict()
            {'x': [5, None, 7], 'n': [1, 1, 2]}
        """
        return self._window("cum_count")

    def _rolling(self, fn: str, window_size: int, min_samples: int | None, min_periods: int | None) -> Expr:
        size = _window_int(window_size, f"{fn}(window_size)", 1)
        if min_samples is not None and min_periods is not None:
            raise PlanError(f"{fn} takes min_samples or min_periods (its older Polars name), not both")
        least = size if min_samples is None and min_periods is None else \
            _window_int(min_samples if min_samples is not None else min_periods, f"{fn}(min_samples)", 0)
        return self._window(fn, options=(size, least))

    def rolling_sum(self, window_size: int, *, min_samples: int | None = None, min_periods: int | None = None) -> Expr:
        """The sum of the `window_size` rows ending at each row (fewer at the start), exact as sum() is; null where
        fewer than `min_samples` (default `window_size`) of them are non-null.

        Examples:
            >>> ei.from_pydict({"x": [1, 2, 3, 4]}).with_columns(s=col("x").rolling_sum(2)).run().to_pydict()
            {'x': [1, 2, 3, 4], 's': [None, 3, 5, 7]}
        """
        return self._rolling("rolling_sum", window_size, min_samples, min_periods)

    def rolling_mean(self, window_size: int, *, min_samples: int | None = None, min_periods: int | None = None) -> Expr:
        """The mean of the non-null values of the `window_size` rows ending at each row (see rolling_sum).

        Examples:
            >>> ei.from_pydict({"x": [1, 2, 3, 4]}).with_columns(m=col("x").rolling_mean(2, min_samples=1)).run().to_pydict()
            {'x': [1, 2, 3, 4], 'm': [1.0, 1.5, 2.5, 3.5]}
        """
        return self._rolling("rolling_mean", window_size, min_samples, min_periods)

    def rolling_min(self, window_size: int, *, min_samples: int | None = None, min_periods: int | None = None) -> Expr:
        """The least non-null value of the `window_size` rows ending at each row (see rolling_sum).

        Examples:
            >>> ei.from_pydict({"x": [3, 1, 2, 4]}).with_columns(m=col("x").rolling_min(2)).run().to_pydict()
            {'x': [3, 1, 2, 4], 'm': [None, 1, 1, 2]}
        """
        return self._rolling("rolling_min", window_size, min_samples, min_periods)

    def rolling_max(self, window_size: int, *, min_samples: int | None = None, min_periods: int | None = None) -> Expr:
        """The greatest non-null value of the `window_size` rows ending at each row, NaN largest (see rolling_sum).

        Examples:
            >>> ei.from_pydict({"x": [3, 1, 2, 4]}).with_columns(m=col("x").rolling_max(2)).run().to_pydict()
            {'x': [3, 1, 2, 4], 'm': [None, 3, 2, 4]}
        """
        return self._rolling("rolling_max", window_size, min_samples, min_periods)

    def _rolling_by(self, fn: str, by: Any, window_size: str | _dt.timedelta, min_samples: int, closed: str) -> Expr:
        if isinstance(window_size, _dt.timedelta):
            window_size = f"{window_size // _dt.timedelta(microseconds=1)}us"
        size = parse_duration(window_size)
        if closed not in F.ROLLING_CLOSED:
            raise PlanError(f"{fn}(closed={closed!r}): closed is one of {', '.join(F.ROLLING_CLOSED)}")
        least = _window_int(min_samples, f"{fn}(min_samples)", 0)
        return self._window(fn, name_or_expr(by), options=(str(size), least, closed))

    def rolling_sum_by(self, by: Any, window_size: str | _dt.timedelta, *, min_samples: int = 1,
                       closed: str = "right") -> Expr:
        """The sum (exact, as sum() is) of the non-null values of the rows whose `by` (a Date or Timestamp column)
        is in the `window_size` ("2h", "1d", "1mo") ending at this row's: (t - window_size, t] ("left" [t - w, t),
        "both", "none"); null where fewer than `min_samples` are there (Polars gives 0 for an empty sum). Row order
        plays no part.

        Examples:
            >>> t = [datetime.datetime(2024, 1, 1, h) for h in (0, 1, 3)]
            >>> ei.from_pydict({"t": t, "x": [1, 2, 4]}).select(s=col("x").rolling_sum_by("t", "2h")).run().to_pydict()
            {'s': [1, 3, 4]}
        """
        return self._rolling_by("rolling_sum_by", by, window_size, min_samples, closed)

    def rolling_mean_by(self, by: Any, window_size: str | _dt.timedelta, *, min_samples: int = 1,
                        closed: str = "right") -> Expr:
        """The mean of the values in the window by time ending at each row (see rolling_sum_by).

        Examples:
            >>> t = [datetime.datetime(2024, 1, 1, h) for h in (0, 1, 3)]
            >>> ei.from_pydict({"t": t, "x": [1, 2, 4]}).select(m=col("x").rolling_mean_by("t", "2h")).run().to_pydict()
            {'m': [1.0, 1.5, 4.0]}
        """
        return self._rolling_by("rolling_mean_by", by, window_size, min_samples, closed)

    def rolling_min_by(self, by: Any, window_size: str | _dt.timedelta, *, min_samples: int = 1,
                       closed: str = "right") -> Expr:
        """The least value in the window by time ending at each row (see rolling_sum_by).

        Examples:
            >>> t = [datetime.date(2024, 1, d) for d in (1, 2, 5)]
            >>> ei.from_pydict({"t": t, "x": [3, 1, 4]}).select(m=col("x").rolling_min_by("t", "3d")).run().to_pydict()
            {'m': [3, 1, 4]}
        """
        return self._rolling_by("rolling_min_by", by, window_size, min_samples, closed)

    def rolling_max_by(self, by: Any, window_size: str | _dt.timedelta, *, min_samples: int = 1,
                       closed: str = "right") -> Expr:
        """The greatest value (NaN largest) in the window by time ending at each row (see rolling_sum_by).

        Examples:
            >>> t = [datetime.datetime(2024, 1, 1, h) for h in (0, 1, 3)]
            >>> flow = ei.from_pydict({"t": t, "g": ["a", "a", "a"], "x": [5, 2, 4]})
            >>> flow.select(m=col("x").rolling_max_by("t", "2h").over("g")).run().to_pydict()
            {'m': [5, 5, 4]}
        """
        return self._rolling_by("rolling_max_by", by, window_size, min_samples, closed)

    @property
    def str(self) -> StringMethods:
        """String functions: `expr.str.contains(...)`, ...

        Examples:
            >>> ei.from_pydict({"s": ["Ab"]}).select(col("s").str.to_upper()).run().to_pydict()
            {'s': ['AB']}
        """
        return StringMethods(self)

    @property
    def dt(self) -> DateMethods:
        """Date parts: `expr.dt.year()`, ...

        Examples:
            >>> ei.from_pydict({"d": [datetime.date(2024, 3, 1)]}).select(col("d").dt.year()).run().to_pydict()
            {'d': [2024]}
        """
        return DateMethods(self)

    @property
    def list(self) -> ListMethods:
        """List functions: `expr.list.len()`, `expr.list.get(i)`, `expr.list.contains(x)`.

        Examples:
            >>> ei.from_pydict({"l": [[1, 2], []]}).select(col("l").list.len()).run().to_pydict()
            {'l': [2, 0]}
        """
        return ListMethods(self)

    @property
    def bin(self) -> BinaryMethods:
        """Binary functions: `expr.bin.size()`.

        Examples:
            >>> ei.from_pydict({"b": [b"\\x00\\xff", b""]}).select(col("b").bin.size()).run().to_pydict()
            {'b': [2, 0]}
        """
        return BinaryMethods(self)

    @property
    def struct(self) -> StructMethods:
        """Struct functions: `expr.struct.field(name)`.

        Examples:
            >>> ei.from_pydict({"s": [{"a": 1, "b": "x"}]}).select(col("s").struct.field("b")).run().to_pydict()
            {'b': ['x']}
        """
        return StructMethods(self)


class StructMethods:
    """`expr.struct.*`: functions of Struct values (`ei.Struct({...})`)."""

    __slots__ = ("_e",)

    def __init__(self, e: Expr):
        self._e = e

    def field(self, name: str) -> Expr:
        """The field `name` of each struct, named `name` (as Polars); null where the struct is null.

        Examples:
            >>> flow = ei.from_pydict({"s": [{"a": 1, "b": "x"}, None]})
            >>> flow.select(col("s").struct.field("a")).run().to_pydict()
            {'a': [1, None]}
        """
        if not isinstance(name, str):
            raise PlanError(f"struct.field() takes a field name (a str), got {name!r}")
        return self._e._call("struct_field", options=(name,)).alias(name)


class BinaryMethods:
    """`expr.bin.*`: functions of Binary values (bytes)."""

    __slots__ = ("_e",)

    def __init__(self, e: Expr):
        self._e = e

    def size(self) -> Expr:
        """The number of bytes, Int64 (Polars' `bin.size()`, whose unit is bytes); null for null.

        Examples:
            >>> ei.from_pydict({"b": [b"ab", None]}).select(col("b").bin.size()).run().to_pydict()
            {'b': [2, None]}
        """
        return self._e._call("bin_size")


class ListMethods:
    """`expr.list.*`: functions of List values (`ei.List(inner)`); positions count from 0."""

    __slots__ = ("_e",)

    def __init__(self, e: Expr):
        self._e = e

    def len(self) -> Expr:
        """The number of elements (nulls included), Int64; null for a null list.

        Examples:
            >>> ei.from_pydict({"l": [[1, None], None]}).select(col("l").list.len()).run().to_pydict()
            {'l': [2, None]}
        """
        return self._e._call("list_len")

    def get(self, index: int, *, null_on_oob: bool = True) -> Expr:
        """The element at `index` (from 0; negative counts from the end), null where the list is shorter.

        Polars raises out of range unless `null_on_oob=True`; eidos always gives null there.

        Examples:
            >>> flow = ei.from_pydict({"l": [[1, 2, 3], [4]]})
            >>> flow.select(first=col("l").list.get(0), last=col("l").list.get(-1), third=col("l").list.get(2)).run().to_pydict()
            {'first': [1, 4], 'last': [3, 4], 'third': [3, None]}
        """
        if not null_on_oob:
            raise PlanError("list.get() gives null out of range on every lane (null_on_oob=True); "
                            "filter on list.len() first to find short lists")
        if not isinstance(index, int) or isinstance(index, bool):
            raise PlanError(f"list.get() takes a constant integer index, got {index!r}")
        return self._e._call("list_get", options=(index,))

    def contains(self, item: Any) -> Expr:
        """True where an element equals `item` (a value or an expression; null elements match nothing),
        null where the list or the item is null.

        Examples:
            >>> flow = ei.from_pydict({"l": [[1, 2], [3, None], None]})
            >>> flow.select(col("l").list.contains(2)).run().to_pydict()
            {'l': [True, False, None]}
        """
        return self._e._call("list_contains", item)


class StringMethods:
    """`expr.str.*`: string functions; positions count code points from 0."""

    __slots__ = ("_e",)

    def __init__(self, e: Expr):
        self._e = e

    def _text_arg(self, fn: str, s: Any) -> Expr:
        if not isinstance(s, str):
            raise PlanError(f"str.{fn}() takes a string, got {s!r}")
        return self._e._call(f"str_{fn}", options=(s,))

    def contains(self, pattern: str, *, literal: bool = False) -> Expr:
        """True where the regular expression `pattern` matches somewhere in the string, as Polars' `contains`;
        `literal=True` looks for the text as it is.

        The pattern is in eidos' portable dialect, matched alike on every lane: `.` is any character but a
        newline, `\\d \\w \\s` are ASCII, `^`/`$` the start and end of the text; backreferences, lookaround,
        `\\b` and flags are a PlanError (docs/semantics.md section 11).

        Examples:
            >>> flow = ei.from_pydict({"s": ["apple", "pear", "a.b"]})
            >>> flow.select(col("s").str.contains("^p|l+e$")).run().to_pydict()
            {'s': [True, True, False]}
            >>> flow.select(col("s").str.contains(".", literal=True)).run().to_pydict()
            {'s': [False, False, True]}
        """
        if literal or not isinstance(pattern, str):
            return self._text_arg("contains", pattern)
        from eidos.ir.regex import validate

        return self._text_arg("contains_regex", validate(pattern))

    def replace(self, pattern: str, value: str, *, literal: bool = False, n: int = 1) -> Expr:
        """The first `n` matches of the regular expression `pattern` replaced by `value`, as Polars' `replace`;
        `literal=True` replaces the text as it is, by `value` as it is.

        In `value`, `$1` or `${1}` is what group 1 matched (`$0` the whole match, groups up to 9), `${name}` the
        group `(?P<name>...)`, `$$` a dollar sign (docs/semantics.md section 11). As in Polars, `n` above 1 needs
        `literal=True`; where eidos differs, `pattern` and `value` are constants, not expressions.

        Examples:
            >>> flow = ei.from_pydict({"s": ["2024-03-09", "n/a"]})
            >>> flow.select(col("s").str.replace(r"(\\d+)-(\\d+)-(\\d+)", "$3.$2.$1")).run().to_pydict()
            {'s': ['09.03.2024', 'n/a']}
            >>> flow.select(col("s").str.replace("-", "", literal=True, n=2)).run().to_pydict()
            {'s': ['20240309', 'n/a']}
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise PlanError(f"str.replace(n=...) is how many matches to replace, an integer of at least 1, got {n!r}")
        if not literal and n != 1:
            raise PlanError("str.replace(pattern, value, n=...) replaces more than one match of literal text only "
                            "(literal=True), as in Polars; str.replace_all replaces every match of a pattern")
        if literal and n > 1:
            return self._replace("str_replace_n", pattern, value, literal, n)
        return self._replace("str_replace" if literal else "str_replace_regex", pattern, value, literal)

    def replace_all(self, pattern: str, value: str, *, literal: bool = False) -> Expr:
        """Every match of the regular expression `pattern` replaced by `value` (`$1`, `${name}`, `$$` as in
        `replace`), as Polars' `replace_all`; `literal=True` replaces the text as it is. Matches do not overlap;
        an empty match right after a match is not replaced (`"baaac"` with `a*` gives `-b-c-`).

        Examples:
            >>> flow = ei.from_pydict({"s": ["a1b22", None]})
            >>> flow.select(col("s").str.replace_all(r"\\d+", "<$0>")).run().to_pydict()
            {'s': ['a<1>b<22>', None]}
        """
        return self._replace("str_replace_all" if literal else "str_replace_all_regex", pattern, value, literal)

    def _replace(self, fn: str, pattern: str, value: str, literal: bool, *more) -> Expr:
        if not isinstance(pattern, str) or not isinstance(value, str):
            raise PlanError(f"{F.method(fn)}(pattern, value) takes two strings, got {pattern!r}, {value!r}")
        if not literal:
            from eidos.ir.regex import replacement

            replacement(pattern, value)   # the pattern is in the dialect and value names groups it has
        return self._e._call(fn, options=(pattern, value, *more))

    def strip_chars(self, characters: str | None = None) -> Expr:
        """The string without the `characters` (any of them, in any order) at its start and end; None strips
        whitespace: Unicode's White_Space characters, as Polars (docs/semantics.md section 11).

        Examples:
            >>> flow = ei.from_pydict({"s": ["\u3000 hi\t", "xxhix"]})
            >>> flow.select(a=col("s").str.strip_chars(), b=col("s").str.strip_chars("x")).run().to_pydict()
            {'a': ['hi', 'xxhix'], 'b': ['\u3000 hi\t', 'hi']}
        """
        return self._strip("str_strip_chars", characters)

    def strip_chars_start(self, characters: str | None = None) -> Expr:
        """`strip_chars` at the start only.

        Examples:
            >>> ei.from_pydict({"s": ["  hi  "]}).select(col("s").str.strip_chars_start()).run().to_pydict()
            {'s': ['hi  ']}
        """
        return self._strip("str_strip_chars_start", characters)

    def strip_chars_end(self, characters: str | None = None) -> Expr:
        """`strip_chars` at the end only.

        Examples:
            >>> ei.from_pydict({"s": ["0.500"]}).select(col("s").str.strip_chars_end("0")).run().to_pydict()
            {'s': ['0.5']}
        """
        return self._strip("str_strip_chars_end", characters)

    def _strip(self, fn: str, characters: str | None) -> Expr:
        if characters is not None and not isinstance(characters, str):
            raise PlanError(f"{F.method(fn)}(characters) takes a string of characters or None (whitespace), "
                            f"got {characters!r}")
        return self._e._call(fn, options=(characters,))

    def split(self, by: str, *, inclusive: bool = False) -> Expr:
        """The parts of the string between each `by` (text as it is), as a List(String), as Polars' `split`: the
        empty `by` splits into code points; `inclusive=True` keeps each `by` at the end of its part.

        Examples:
            >>> flow = ei.from_pydict({"s": ["a,b,", "", None]})
            >>> flow.select(a=col("s").str.split(","), b=col("s").str.split(",", inclusive=True)).run().to_pydict()
            {'a': [['a', 'b', ''], [''], None], 'b': [['a,', 'b,'], [], None]}
        """
        if not isinstance(by, str) or not isinstance(inclusive, bool):
            raise PlanError(f"str.split(by, inclusive=False) takes a string and a bool, got {by!r}, {inclusive!r}")
        return self._e._call("str_split_inclusive" if inclusive else "str_split", options=(by,))

    def starts_with(self, s: str) -> Expr:
        """True where the string starts with `s`.

        Examples:
            >>> ei.from_pydict({"s": ["apple", "pear"]}).select(col("s").str.starts_with("ap")).run().to_pydict()
            {'s': [True, False]}
        """
        return self._text_arg("starts_with", s)

    def ends_with(self, s: str) -> Expr:
        """True where the string ends with `s`.

        Examples:
            >>> ei.from_pydict({"s": ["apple", "pear"]}).select(col("s").str.ends_with("ar")).run().to_pydict()
            {'s': [False, True]}
        """
        return self._text_arg("ends_with", s)

    def like(self, pattern: str) -> Expr:
        """True where the string matches the SQL LIKE `pattern`: `%` any run of characters, `_` one.

        Examples:
            >>> ei.from_pydict({"s": ["apple", "pear", "peach"]}).select(col("s").str.like("pe_r%")).run().to_pydict()
            {'s': [False, True, False]}
        """
        return self._text_arg("like", pattern)

    def to_lower(self) -> Expr:
        """The string in lower case.

        Examples:
            >>> ei.from_pydict({"s": ["Zürich"]}).select(col("s").str.to_lower()).run().to_pydict()
            {'s': ['zürich']}
        """
        return self._e._call("str_to_lower")

    def to_upper(self) -> Expr:
        """The string in upper case.

        Examples:
            >>> ei.from_pydict({"s": ["Zürich"]}).select(col("s").str.to_upper()).run().to_pydict()
            {'s': ['ZÜRICH']}
        """
        return self._e._call("str_to_upper")

    def len(self) -> Expr:
        """The length in code points (not bytes).

        Examples:
            >>> ei.from_pydict({"s": ["Zürich", ""]}).select(col("s").str.len()).run().to_pydict()
            {'s': [6, 0]}
        """
        return self._e._call("str_len")

    def to_date(self, format: str, *, strict: bool = True) -> Expr:  # noqa: A002 - Polars' name
        """The Date the text names in `format` (codes %Y %m %d %b %%, each of a fixed width: %Y four
        digits, the others two, %b Jan..Dec). Text that does not match, or names no real date, is an
        error, or null with `strict=False` (as Polars). Without a format, use `.cast(ei.Date)`.

        Examples:
            >>> flow = ei.from_pydict({"s": ["07/03/2024", "31/02/2024"]})
            >>> flow.select(d=col("s").str.to_date("%d/%m/%Y", strict=False)).run().to_pydict()
            {'d': [datetime.date(2024, 3, 7), None]}
        """
        return self._e._call("str_to_date", options=(format, _flag(strict, "strict")))

    def to_datetime(self, format: str, *, strict: bool = True) -> Expr:  # noqa: A002 - Polars' name
        """The Timestamp the text names in `format`: the codes of `to_date` and %H %M %S (two digits)
        and %f (six digits of microseconds); fields the format lacks are midnight and day 1.

        Examples:
            >>> flow = ei.from_pydict({"s": ["2024-03-07 13:05:02.250000"]})
            >>> flow.select(t=col("s").str.to_datetime("%Y-%m-%d %H:%M:%S.%f")).run().to_pydict()
            {'t': [datetime.datetime(2024, 3, 7, 13, 5, 2, 250000)]}
        """
        return self._e._call("str_to_datetime", options=(format, _flag(strict, "strict")))

    def strptime(self, dtype: Any, format: str, *, strict: bool = True) -> Expr:  # noqa: A002 - Polars' name
        """`to_date` or `to_datetime` by `dtype` (ei.Date or ei.Timestamp), as Polars' `str.strptime`.

        Examples:
            >>> flow = ei.from_pydict({"s": ["09.03.2024"]})
            >>> flow.select(d=col("s").str.strptime(ei.Date, "%d.%m.%Y"),
            ...             t=col("s").str.strptime(ei.Timestamp, "%d.%m.%Y")).run().to_pylist()
            [{'d': datetime.date(2024, 3, 9), 't': datetime.datetime(2024, 3, 9, 0, 0)}]
        """
        t = T.coerce(dtype)
        if t not in (T.Date, T.Timestamp):
            raise PlanError(f"str.strptime() reads ei.Date or ei.Timestamp, not {t}")
        return self.to_date(format, strict=strict) if t == T.Date else self.to_datetime(format, strict=strict)

    def slice(self, offset: int, length: int | None = None) -> Expr:
        """`length` code points from `offset` (from 0; negative counts from the end); to the end without `length`.

        Examples:
            >>> flow = ei.from_pydict({"s": ["abcdef"]})
            >>> flow.select(a=col("s").str.slice(1, 3), b=col("s").str.slice(-2)).run().to_pydict()
            {'a': ['bcd'], 'b': ['ef']}
        """
        if not isinstance(offset, int) or (length is not None and (not isinstance(length, int) or length < 0)):
            raise PlanError(f"str.slice(offset, length) takes an integer offset and a non-negative "
                            f"integer length or None, got {offset!r}, {length!r}")
        return self._e._call("str_slice", options=(offset, length))


class DateMethods:
    """`expr.dt.*`: parts of dates and timestamps, and their truncation."""

    __slots__ = ("_e",)

    def __init__(self, e: Expr):
        self._e = e

    def year(self) -> Expr:
        """The year.

        Examples:
            >>> ei.from_pydict({"d": [datetime.date(2024, 3, 9)]}).select(col("d").dt.year()).run().to_pydict()
            {'d': [2024]}
        """
        return self._e._call("dt_year")

    def month(self) -> Expr:
        """The month, 1 to 12.

        Examples:
            >>> ei.from_pydict({"d": [datetime.date(2024, 3, 9)]}).select(col("d").dt.month()).run().to_pydict()
            {'d': [3]}
        """
        return self._e._call("dt_month")

    def day(self) -> Expr:
        """The day of the month, 1 to 31.

        Examples:
            >>> ei.from_pydict({"d": [datetime.date(2024, 3, 9)]}).select(col("d").dt.day()).run().to_pydict()
            {'d': [9]}
        """
        return self._e._call("dt_day")

    def weekday(self) -> Expr:
        """The ISO day of the week: 1 for Monday to 7 for Sunday (as Polars).

        Examples:
            >>> ei.from_pydict({"d": [datetime.date(2024, 3, 9)]}).select(col("d").dt.weekday()).run().to_pydict()
            {'d': [6]}
        """
        return self._e._call("dt_weekday")

    def ordinal_day(self) -> Expr:
        """The day of the year, 1 to 366.

        Examples:
            >>> ei.from_pydict({"d": [datetime.date(2024, 3, 9)]}).select(col("d").dt.ordinal_day()).run().to_pydict()
            {'d': [69]}
        """
        return self._e._call("dt_ordinal_day")

    def hour(self) -> Expr:
        """The hour, 0 to 23, of a Timestamp.

        Examples:
            >>> t = datetime.datetime(2024, 3, 9, 13, 45, 12, 500000)
            >>> flow = ei.from_pydict({"t": [t]})
            >>> flow.select(h=col("t").dt.hour(), m=col("t").dt.minute(), s=col("t").dt.second()).run().to_pydict()
            {'h': [13], 'm': [45], 's': [12]}
        """
        return self._e._call("dt_hour")

    def minute(self) -> Expr:
        """The minute, 0 to 59, of a Timestamp.

        Examples:
            >>> ei.from_pydict({"t": [datetime.datetime(2024, 3, 9, 13, 45)]}).select(col("t").dt.minute()).run().to_pydict()
            {'t': [45]}
        """
        return self._e._call("dt_minute")

    def time(self) -> Expr:
        """The time of day (ei.Time) of a Timestamp, in its zone's local time for a zoned one.

        Examples:
            >>> flow = ei.from_pydict({"t": [datetime.datetime(2024, 3, 9, 13, 45, 12)]})
            >>> flow.select(col("t").dt.time()).run().to_pydict()
            {'t': [datetime.time(13, 45, 12)]}
        """
        return self._e._call("dt_time")

    def replace_time_zone(self, time_zone: str | None) -> Expr:
        """The same wall-clock time read in `time_zone` (an IANA name; None drops the zone), as Polars'
        `dt.replace_time_zone`. A wall-clock time the zone skips (a spring-forward gap) or repeats (an
        autumn hour) raises rather than picking one: eidos has no `ambiguous=` or `non_existent=` yet.

        Examples:
            >>> flow = ei.from_pydict({"t": [datetime.datetime(2024, 7, 1, 12)]})
            >>> flow.select(col("t").dt.replace_time_zone("Europe/Berlin").dt.convert_time_zone("UTC")).run().to_pydict()
            {'t': [datetime.datetime(2024, 7, 1, 10, 0, tzinfo=zoneinfo.ZoneInfo(key='UTC'))]}
        """
        return self._e._call("dt_replace_time_zone", options=(time_zone,))

    def convert_time_zone(self, time_zone: str) -> Expr:
        """The same instant shown in `time_zone` (an IANA name), as Polars' `dt.convert_time_zone`;
        the timestamp must have a zone (give a naive one its zone with `replace_time_zone`).

        Examples:
            >>> from zoneinfo import ZoneInfo
            >>> flow = ei.from_pydict({"t": [datetime.datetime(2024, 7, 1, 12)]})
            >>> berlin = col("t").dt.replace_time_zone("UTC").dt.convert_time_zone("Europe/Berlin")
            >>> flow.select(h=berlin.dt.hour(), local=berlin.dt.replace_time_zone(None)).run().to_pydict()
            {'h': [14], 'local': [datetime.datetime(2024, 7, 1, 14, 0)]}
        """
        return self._e._call("dt_convert_time_zone", options=(time_zone,))

    def second(self) -> Expr:
        """The whole seconds, 0 to 59, of a Timestamp (the fraction is dropped, as Polars does).

        Examples:
            >>> t = datetime.datetime(2024, 3, 9, 13, 45, 12, 999999)
            >>> ei.from_pydict({"t": [t]}).select(col("t").dt.second()).run().to_pydict()
            {'t': [12]}
        """
        return self._e._call("dt_second")

    def truncate(self, every: str | _dt.timedelta) -> Expr:
        """The start of the period of length `every` that holds each value: a duration string such as
        "1h", "15m", "1d", "1w" (from a Monday), "1mo", "1q", "1y", or a `datetime.timedelta`. Days and
        smaller units count from 1970-01-01, months from January 1970 (as Polars' dt.truncate).

        Examples:
            >>> t = datetime.datetime(2024, 3, 7, 13, 45)
            >>> flow = ei.from_pydict({"t": [t]})
            >>> flow.select(h=col("t").dt.truncate("1h"), w=col("t").dt.truncate("1w"), q=col("t").dt.truncate("1q")).run().to_pylist()
            [{'h': datetime.datetime(2024, 3, 7, 13, 0), 'w': datetime.datetime(2024, 3, 4, 0, 0), 'q': datetime.datetime(2024, 1, 1, 0, 0)}]
        """
        if isinstance(every, _dt.timedelta):
            every = f"{every // _dt.timedelta(microseconds=1)}us"
        return self._e._call("dt_truncate", options=(str(parse_duration(every)),))

    def strftime(self, format: str) -> Expr:  # noqa: A002 - Polars' name
        """The value as text in `format`, of the codes %Y %y %m %d %j %H %I %M %S %f (6 digits of
        microseconds) %p %a %A %b %B %% (English names; Date values take no time-of-day codes).

        Examples:
            >>> flow = ei.from_pydict({"t": [datetime.datetime(2024, 3, 7, 13, 5)]})
            >>> flow.select(s=col("t").dt.strftime("%a %d %b %Y, %I:%M %p")).run().to_pydict()
            {'s': ['Thu 07 Mar 2024, 01:05 PM']}
        """
        return self._e._call("dt_strftime", options=(format,))

    def total_days(self) -> Expr:
        """A Duration's whole days, toward zero (Int64), as Polars' `dt.total_days`.

        Examples:
            >>> flow = ei.from_pydict({"a": [datetime.datetime(2024, 1, 3, 12)], "b": [datetime.datetime(2024, 1, 1)]})
            >>> gap = col("a") - col("b")
            >>> flow.select(d=gap.dt.total_days(), h=gap.dt.total_hours(), s=gap.dt.total_seconds()).run().to_pydict()
            {'d': [2], 'h': [60], 's': [216000]}
        """
        return self._e._call("dt_total_days")

    def total_hours(self) -> Expr:
        """A Duration's whole hours, toward zero (Int64).

        Examples:
            >>> gap = ei.duration(days=-1, hours=-12, minutes=-30)
            >>> ei.from_pydict({"a": [1]}).select(n=gap.dt.total_hours()).run().to_pydict()
            {'n': [-36]}
        """
        return self._e._call("dt_total_hours")

    def total_minutes(self) -> Expr:
        """A Duration's whole minutes, toward zero (Int64).

        Examples:
            >>> gap = ei.duration(days=-1, hours=-12, minutes=-30)
            >>> ei.from_pydict({"a": [1]}).select(n=gap.dt.total_minutes()).run().to_pydict()
            {'n': [-2190]}
        """
        return self._e._call("dt_total_minutes")

    def total_seconds(self) -> Expr:
        """A Duration's whole seconds, toward zero (Int64; Polars' `total_seconds` is whole seconds too).

        Examples:
            >>> gap = ei.duration(days=-1, hours=-12, minutes=-30)
            >>> ei.from_pydict({"a": [1]}).select(n=gap.dt.total_seconds()).run().to_pydict()
            {'n': [-131400]}
        """
        return self._e._call("dt_total_seconds")

    def total_milliseconds(self) -> Expr:
        """A Duration's whole milliseconds, toward zero (Int64).

        Examples:
            >>> gap = ei.duration(days=-1, hours=-12, minutes=-30)
            >>> ei.from_pydict({"a": [1]}).select(n=gap.dt.total_milliseconds()).run().to_pydict()
            {'n': [-131400000]}
        """
        return self._e._call("dt_total_milliseconds")

    def total_microseconds(self) -> Expr:
        """A Duration's microseconds (Int64).

        Examples:
            >>> gap = ei.duration(days=-1, hours=-12, minutes=-30)
            >>> ei.from_pydict({"a": [1]}).select(n=gap.dt.total_microseconds()).run().to_pydict()
            {'n': [-131400000000]}
        """
        return self._e._call("dt_total_microseconds")


def col(name: str) -> Expr:
    """The column called `name`.

    Examples:
        >>> ei.from_pydict({"a": [1, 2], "b": [3, 4]}).select(col("b")).run().to_pydict()
        {'b': [3, 4]}
    """
    if not isinstance(name, str):
        raise PlanError(f"col() takes a column name (str), got {name!r}")
    return Expr(E.Column(name))


def lit(value: Any, dtype: Any = None) -> Expr:
    """A constant. Bare numbers adapt to the column type they meet; give `dtype` to fix it.

    Examples:
        >>> flow = ei.from_pydict({"a": [1, 2]}).select("a", one=lit(1), half=lit(0.5, ei.Float32))
        >>> flow.schema
        Schema(a: Int64, one: Int64, half: Float32)
        >>> flow.run().to_pydict()
        {'a': [1, 2], 'one': [1, 1], 'half': [0.5, 0.5]}
    """
    if isinstance(value, Expr):
        return value
    if dtype is None:
        natural = literal_dtype(value)
        weak = natural.is_numeric and not natural.is_decimal or natural == T.Null
        return Expr(E.Literal(value, natural, weak=weak))
    target = T.coerce(dtype)
    return Expr(E.Literal(convert_literal(value, target), target))


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise PlanError(f"{name} is True or False, got {value!r}")
    return value


_FILTERABLE = ("sum", "mean", "min", "max", "count", "n_unique", "std", "var", "median", "quantile")


class Filtered:
    """`x.filter(predicate)`: the values of `x` where `predicate` is true, to aggregate (`.sum()`,
    `.mean()`, ...). Outside an aggregation a filter would change the number of rows, so only the
    aggregations are here; filter the flow instead."""

    __slots__ = ("_values",)

    def __init__(self, values: Expr):
        self._values = values  # null where the predicate is not true; aggregations skip nulls

    def __getattr__(self, name: str) -> Any:
        if name in _FILTERABLE:
            return getattr(self._values, name)
        raise PlanError(f"x.filter(predicate) is for aggregations ({', '.join(_FILTERABLE)}), not {name}; "
                        "to drop rows, use flow.filter(predicate)")


def coalesce(*exprs: Any) -> Expr:
    """The first of `exprs` that is not null, in each row (a str names a column, as in Polars).

    Examples:
        >>> flow = ei.from_pydict({"a": [1, None, None], "b": [None, 2, None]})
        >>> flow.select(c=ei.coalesce("a", "b", 0)).run().to_pydict()
        {'c': [1, 2, 0]}
    """
    if not exprs:
        raise PlanError("coalesce takes at least one expression")
    nodes = [name_or_expr(e) if isinstance(e, str) else to_ir(e) for e in exprs]
    if len(nodes) == 1:
        return Expr(nodes[0])
    return Expr(E.Case(tuple((E.Call("is_not_null", (n,)), n) for n in nodes[:-1]), nodes[-1]))


def struct(*exprs: Any, **named: Any) -> Expr:
    """A Struct of `exprs` (each field named as its output name; a str names a column) and `named` fields,
    as Polars' `pl.struct`; named "struct" unless aliased. A row's struct is never null; its fields may be.

    Examples:
        >>> flow = ei.from_pydict({"a": [1, None], "b": ["x", "y"]})
        >>> flow.select(s=ei.struct("a", c=col("b").str.to_upper())).run().to_pydict()
        {'s': [{'a': 1, 'c': 'X'}, {'a': None, 'c': 'Y'}]}
    """
    items = [to_ir(col(e) if isinstance(e, str) else e) for e in exprs]
    fields = [(E.output_name(node), node) for node in items]
    if any(n is None for n, _ in fields):
        raise PlanError("ei.struct() names each field: alias an expression that is not a column, or pass it by keyword")
    fields += [(n, to_ir(v)) for n, v in named.items()]
    if not fields:
        raise PlanError("ei.struct() takes at least one field")
    names = tuple(n for n, _ in fields)
    if len(set(names)) != len(names):
        raise PlanError(f"ei.struct() field names must differ, got {list(names)}; alias the expressions")
    return Expr(E.Call("struct", tuple(node for _, node in fields), (names,))).alias("struct")


def row_number() -> Expr:
    """1, 2, 3, ... for the rows of each partition in window order (with `over`), as SQL's ROW_NUMBER().
    Polars spells it `pl.int_range(pl.len()).over(...)`, from 0: eidos counts from 1, as SQL does, so
    "the first n of each group" reads `row_number().over(g, order_by=...) <= n`.

    Examples:
        >>> flow = ei.from_pydict({"g": ["a", "b", "a", "a"], "x": [3, 5, 1, 2]})
        >>> flow.with_columns(n=ei.row_number().over("g", order_by="x")).run().to_pydict()
        {'g': ['a', 'b', 'a', 'a'], 'x': [3, 5, 1, 2], 'n': [3, 1, 1, 2]}
    """
    return Expr(E.Window("row_number"))


def _window_int(v: Any, what: str, least: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not least <= v < 2**31:
        raise PlanError(f"{what} takes an integer from {least} to 2**31 - 1, got {v!r}")
    return v


def concat_str(exprs: Any, *more_exprs: Any, separator: str = "", ignore_nulls: bool = False) -> Expr:
    """The strings of `exprs` joined by `separator`, in each row (a str names a column), as Polars'
    `concat_str`: null where any is null, unless `ignore_nulls`, which leaves the nulls out (all null gives "").
    Where eidos differs from Polars: the expressions must be Strings (cast others with `.cast(ei.String)`,
    whose text for floats differs between lanes). It is made of `+` on strings, `coalesce` and `str.slice`.

    Examples:
        >>> flow = ei.from_pydict({"a": ["x", "y", None], "b": ["1", None, None]})
        >>> flow.select(j=ei.concat_str(["a", "b"], separator="-"),
        ...             k=ei.concat_str("a", "b", separator="-", ignore_nulls=True)).run().to_pydict()
        {'j': ['x-1', None, None], 'k': ['x-1', 'y', '']}
        >>> flow.select(s=col("a") + "!").run().to_pydict()
        {'s': ['x!', 'y!', None]}
    """
    items = [*(exprs if isinstance(exprs, (list, tuple)) else [exprs]), *more_exprs]
    if not items or not isinstance(separator, str) or not isinstance(ignore_nulls, bool):
        raise PlanError(f"concat_str(exprs, separator='', ignore_nulls=False) takes at least one expression, a "
                        f"string and a bool, got {items!r}, {separator!r}, {ignore_nulls!r}")
    nodes = [Expr(name_or_expr(e)) if isinstance(e, str) else Expr(to_ir(e)) for e in items]
    if not ignore_nulls:
        return functools.reduce(lambda a, b: a + separator + b if separator else a + b, nodes)
    # each present string after a separator, the nulls as "", then the first separator cut off
    joined = functools.reduce(lambda a, b: a + b, [coalesce(lit(separator) + n if separator else n, lit("")) for n in nodes])
    return joined.str.slice(len(separator)) if separator else joined


def count() -> Expr:
    """The number of rows (in each group), nulls included; `col(name).count()` counts non-null values.

    Examples:
        >>> flow = ei.from_pydict({"k": ["a", "b", "a"], "v": [1, None, 3]})
        >>> flow.group_by("k").agg(n=count()).sort("k").run().to_pydict()
        {'k': ['a', 'b'], 'n': [2, 1]}
    """
    return Expr(E.Agg("count_rows"))


def date(year: int, month: int, day: int) -> Expr:
    """A date literal; a `datetime.date` works wherever a literal does.

    Examples:
        >>> flow = ei.from_pydict({"d": [datetime.date(2023, 12, 31), datetime.date(2024, 1, 2)]})
        >>> flow.filter(col("d") >= date(2024, 1, 1)).run().to_pydict()
        {'d': [datetime.date(2024, 1, 2)]}
    """
    try:
        return lit(_dt.date(year, month, day))
    except (TypeError, ValueError) as e:
        raise PlanError(f"invalid date {year}-{month}-{day}: {e}") from None


def datetime(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0,
             microsecond: int = 0) -> Expr:
    """A timestamp literal (as Polars' `pl.datetime`, of constants); a `datetime.datetime` works
    wherever a literal does.

    Examples:
        >>> flow = ei.from_pydict({"t": [datetime.datetime(2024, 1, 2, 3, 4, 5), datetime.datetime(2024, 1, 2, 9)]})
        >>> flow.filter(col("t") < ei.datetime(2024, 1, 2, 6)).run().to_pydict()
        {'t': [datetime.datetime(2024, 1, 2, 3, 4, 5)]}
    """
    try:
        return lit(_dt.datetime(year, month, day, hour, minute, second, microsecond))
    except (TypeError, ValueError) as e:
        raise PlanError(f"invalid datetime {year}-{month}-{day} {hour}:{minute}:{second}.{microsecond}: {e}") from None


def duration(*, weeks: int = 0, days: int = 0, hours: int = 0, minutes: int = 0, seconds: int = 0,
             milliseconds: int = 0, microseconds: int = 0) -> Expr:
    """A Duration literal (as Polars' `pl.duration`, of constants); a `datetime.timedelta` works
    wherever a literal does. Add it to a Timestamp, or compare it with `timestamp - timestamp`.

    Examples:
        >>> flow = ei.from_pydict({"t": [datetime.datetime(2024, 1, 31, 22)]})
        >>> flow.select(later=col("t") + ei.duration(days=1, hours=3)).run().to_pydict()
        {'later': [datetime.datetime(2024, 2, 2, 1, 0)]}
    """
    parts = {"weeks": weeks, "days": days, "hours": hours, "minutes": minutes, "seconds": seconds,
             "milliseconds": milliseconds, "microseconds": microseconds}
    bad = {k: v for k, v in parts.items() if isinstance(v, bool) or not isinstance(v, int)}
    if bad:
        raise PlanError(f"ei.duration() takes whole numbers of each unit, got {bad}")
    try:
        return lit(_dt.timedelta(**parts))
    except OverflowError:
        raise PlanError(f"ei.duration({parts}) is out of range") from None


class _When:
    __slots__ = ("_branches", "_cond")

    def __init__(self, branches: tuple, cond: E.Expr):
        self._branches, self._cond = branches, cond

    def then(self, value: Any) -> Then:
        """The value where the condition holds; chain `.when(...)` or close with `.otherwise(...)`.

        Examples:
            >>> ei.from_pydict({"a": [1, 5]}).select(big=when(col("a") > 2).then(lit("yes"))).run().to_pydict()
            {'big': [None, 'yes']}
        """
        return Then(self._branches + ((self._cond, to_ir(value)),))


class Then(Expr):
    """when(...).then(...): an expression (null where no branch matches) that can chain more branches."""

    __slots__ = ("_branches",)

    def __init__(self, branches: tuple):
        super().__init__(E.Case(branches, E.Literal(None, T.Null, weak=True)))
        self._branches = branches

    def when(self, condition: Any) -> _When:
        """Another branch, tried when the ones before it do not hold.

        Examples:
            >>> flow = ei.from_pydict({"a": [1, 5, 9]})
            >>> size = when(col("a") > 8).then(lit("big")).when(col("a") > 2).then(lit("mid")).otherwise(lit("small"))
            >>> flow.select(size=size).run().to_pydict()
            {'size': ['small', 'mid', 'big']}
        """
        return _When(self._branches, to_ir(condition))

    def otherwise(self, value: Any) -> Expr:
        """The value where no branch holds (without it, null).

        Examples:
            >>> flow = ei.from_pydict({"a": [1, 5]})
            >>> flow.select(big=when(col("a") > 2).then(True).otherwise(False)).run().to_pydict()
            {'big': [False, True]}
        """
        return Expr(E.Case(self._branches, to_ir(value)))


def when(condition: Any) -> _When:
    """Start a conditional: `when(cond).then(v)[.when(c).then(v)...].otherwise(v)`; the first branch that holds wins.

    Examples:
        >>> flow = ei.from_pydict({"a": [1, 5, None]})
        >>> flow.select(sign=when(col("a") > 2).then(lit("big")).otherwise(lit("small"))).run().to_pydict()
        {'sign': ['small', 'big', 'small']}
    """
    return _When((), to_ir(condition))


class Udf:
    """A per-row Python function as an expression builder: call it with columns to get an `Expr`.

    `ei.udf` makes one; `.fn` is the function itself, `.return_dtype` what it returns.
    """

    def __init__(self, fn: Callable, return_dtype: Any):
        if not callable(fn):
            raise PlanError(f"udf() takes a callable, got {fn!r}")
        self.fn, self.return_dtype = fn, T.coerce(return_dtype)
        functools.update_wrapper(self, fn)

    @property
    def __eidos_function__(self) -> Callable:  # what the trust model registers and resolves
        return self.fn

    def __call__(self, *args: Any) -> Expr:
        return Expr(E.Udf(self.fn, self.return_dtype,
                          tuple(name_or_expr(a) if isinstance(a, str) else to_ir(a) for a in args)))

    def __repr__(self) -> str:
        return f"udf({getattr(self.fn, '__qualname__', self.fn)!r}, {self.return_dtype})"


_NO_DTYPE = object()


def udf(fn_or_dtype: Any, return_dtype: Any = _NO_DTYPE, *, name: str | None = None,
        replace: bool = False) -> Any:
    """A per-row Python function as an expression: `ei.udf(f, ei.Float64)(col("a"), col("b"))`.

    As a decorator, `@ei.udf(ei.Float64)` also registers the function (`ei.register_udf`, under
    `name`, by default `module:qualname`), so a plan that names it loads in any process that
    registered it, without importing anything. `ei.udf(f, dtype)` registers only when given a
    `name`: its plans are stored by `module:qualname`, and another process loads them only when
    it registers `f` or trusts its module (`Flow.from_json(text, trusted_modules=...)`).

    The function is opaque to the lanes that compile plans, so the planner sends such plans to a
    lane that can call Python. A str argument names a column.

    Examples:
        >>> hypot = udf(lambda a, b: (a * a + b * b) ** 0.5, ei.Float64)
        >>> ei.from_pydict({"a": [3.0], "b": [4.0]}).select(h=hypot("a", col("b"))).run().to_pydict()
        {'h': [5.0]}
        >>> @udf(ei.Int64, name="examples:twice")
        ... def twice(x):
        ...     return None if x is None else 2 * x
        >>> flow = ei.from_pydict({"a": [1, None]}).select(b=twice("a"))
        >>> ei.Flow.from_json(flow.to_json()).run().to_pydict()
        {'b': [2, None]}
    """
    from eidos.hal.trust import register_udf

    if return_dtype is not _NO_DTYPE:
        if name is not None:
            register_udf(fn_or_dtype, name, replace=replace)
        return Udf(fn_or_dtype, return_dtype)
    if callable(fn_or_dtype) and not isinstance(fn_or_dtype, (T.DType, type)):
        raise PlanError(f"udf({fn_or_dtype!r}) needs the dtype the function returns: ei.udf(fn, ei.Float64), "
                        "or @ei.udf(ei.Float64) above its definition")
    dtype = T.coerce(fn_or_dtype)

    def register(fn: Callable) -> Udf:
        built = Udf(fn, dtype)
        register_udf(fn, name, replace=replace)
        return built

    return register
