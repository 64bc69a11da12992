"""A Flow in other libraries: the Arrow C stream, pandas (both ways), Polars, NumPy, torch, and what a
notebook shows for a Flow, a run and a tensor."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col
from eidos.errors import DTypeError, ExecutionError, PlanError
from eidos.testing.strategies import examples
from tests.lanes.helpers import lane_or_skip

pd = pytest.importorskip("pandas")

LANES = ["reference", "polars", "duckdb"]


def _flow():
    return (ei.from_pydict({"k": ["a", "b", "a"], "x": [1, 2, 3], "y": [0.5, 1.5, 2.5]})
            .group_by("k").agg(n=ei.count(), s=col("x").sum(), m=col("y").mean()).sort("k"))


def test_the_arrow_c_stream_runs_the_flow_for_pyarrow_polars_and_duckdb():
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    flow = _flow()
    expected = flow.run(engine="reference")
    assert pa.table(flow).equals(expected)
    assert pl.DataFrame(flow).to_arrow().to_pydict() == expected.to_pydict()
    assert duckdb.sql("SELECT k, s FROM flow WHERE n > 1").fetchall() == [("a", 4)]  # noqa: F841 (flow by name)


@pytest.mark.parametrize("lane", LANES)
def test_conversions_hold_each_lanes_result(lane):
    lane_or_skip(lane)
    flow = _flow()
    expected = flow.run(engine="reference")
    assert flow.to_pandas(lane).equals(expected.to_pandas())
    assert flow.to_polars(lane).to_arrow().to_pydict() == expected.to_pydict()
    numbers = flow.select("n", "s", "m")
    matrix = numbers.to_numpy(lane)
    assert matrix.dtype == np.float64 and matrix.tolist() == [[2, 4, 1.5], [1, 2, 1.5]]


def test_numpy_and_eidos_tensors_take_a_flow():
    flow = ei.from_pydict({"x": [1, 2], "y": [3, 4]})
    assert np.asarray(flow).tolist() == [[1, 3], [2, 4]]
    assert np.asarray(flow, dtype=np.float32).dtype == np.float32
    t = ei.tensor(flow)
    assert t.shape == (2, 2) and t.dtype == "int64" and (t.sum(axis=0).tolist() == [3, 7])


def test_to_torch_gives_one_tensor_or_one_per_column():
    torch = pytest.importorskip("torch")
    flow = ei.from_pydict({"x": [1, 2], "y": [0.5, 1.5], "b": [True, False]})
    both = flow.to_torch()
    assert both.dtype == torch.float64 and both.tolist() == [[1.0, 0.5, 1.0], [2.0, 1.5, 0.0]]
    each = flow.to_torch(return_type="dict")
    assert each["x"].dtype == torch.int64 and each["b"].dtype == torch.bool and each["y"].tolist() == [0.5, 1.5]
    assert flow.to_torch(dtype=torch.float32).dtype == torch.float32
    with pytest.raises(PlanError, match="'tensor' or 'dict'"):
        flow.to_torch(return_type="list")


def test_a_matrix_refuses_text_and_nulls_naming_the_column():
    with pytest.raises(DTypeError, match=r"column name is String, not a number.*cast"):
        ei.from_pydict({"x": [1], "name": ["a"]}).to_numpy()
    with pytest.raises(ExecutionError, match=r"column x holds 1 null.*fill_null"):
        ei.from_pydict({"x": [1, None]}).to_numpy()
    assert ei.from_pydict({"x": [1, None]}).with_columns(x=col("x").fill_null(0)).to_numpy().tolist() == [[1], [0]]


numbers = st.one_of(st.integers(-2**40, 2**40), st.floats(allow_nan=True, allow_infinity=True), st.booleans())


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.sampled_from(["i", "f", "b"]), min_size=1, max_size=4).flatmap(
    lambda kinds: st.tuples(st.just(kinds), st.integers(0, 6))), st.data())
def test_to_numpy_is_numpys_stack_of_the_columns(shape, data):
    kinds, rows = shape
    make = {"i": st.integers(-2**40, 2**40), "f": st.floats(allow_nan=True, allow_infinity=True), "b": st.booleans()}
    kind = {"i": pa.int64(), "f": pa.float64(), "b": pa.bool_()}
    columns = {f"c{j}": pa.array(data.draw(st.lists(make[k], min_size=rows, max_size=rows)), kind[k])
               for j, k in enumerate(kinds)}
    table = pa.table(columns)
    got = ei.from_arrow(table).to_numpy()
    expected = np.column_stack([c.to_numpy() for c in table.columns]) if rows else \
        np.empty((0, len(kinds)), np.result_type(*[np.dtype(kind[k].to_pandas_dtype()) for k in kinds]))
    assert got.shape == (rows, len(kinds)) and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_a_pandas_index_is_dropped_or_kept_by_include_index():
    named = pd.DataFrame({"a": [1, 2]}, index=pd.Index(["x", "y"], name="key"))
    unnamed = pd.DataFrame({"a": [1, 2]}, index=[10, 20])
    levels = pd.DataFrame({"a": [1, 2]}, index=pd.MultiIndex.from_tuples([("p", 1), ("q", 2)], names=["g", None]))
    for df in (named, unnamed, levels):
        assert ei.from_pandas(df).columns == ("a",)
        assert ei.from_arrow(df).columns == ("a",)  # never __index_level_0__
    assert ei.from_pandas(named, include_index=True).run().to_pydict() == {"key": ["x", "y"], "a": [1, 2]}
    assert ei.from_pandas(unnamed, include_index=True).run().to_pydict() == {"index": [10, 20], "a": [1, 2]}
    assert ei.from_pandas(levels, include_index=True).columns == ("g", "level_1", "a")
    with pytest.raises(PlanError, match="takes a pandas DataFrame"):
        ei.from_pandas({"a": [1]})


def test_a_flows_html_names_its_columns_lane_and_plan_escaped():
    flow = ei.from_pydict({"<script>alert(1)</script>": [1, 2]}).filter(col("<script>alert(1)</script>") > 1)
    page = flow._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    lane = flow.explain().splitlines()[0].split()[1]
    assert f"lane {lane} (rule " in page and "Int64" in page and "Filter(" in page


def test_a_flows_html_says_when_no_lane_can_run_it(monkeypatch):
    monkeypatch.setenv("EIDOS_BACKEND", "no-such-lane")
    page = ei.from_pydict({"a": [1]})._repr_html_()
    assert "no lane can run it:" in page and "no-such-lane" in page


def test_a_runs_and_a_tensors_html():
    flow = ei.from_pydict({"a": [1, 2]})
    flow.run(engine="reference")
    page = ei.last_run()._repr_html_()
    assert "ran on reference in" in page and "<td style='text-align:left'>ok</td>" in page
    page = ei.tensor([[1.5, 2.0]])._repr_html_()
    assert "shape (1, 2), float64, on cpu" in page and "[[1.5, 2. ]]" in page
