"""Files whose contents drift: every lane that reads files gives the reference lane's exact answer or raises
an EidosError naming the column, the file and both types; never a value converted into the wrong type.

Covers parquet folders whose files disagree (when the Flow is built and when a file changes after it),
columns that differ only in case, column order, and CSV values past the block types are inferred from.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col
from eidos.errors import ExecutionError, PlanError
from eidos.hal import registry
from eidos.testing.compare import assert_tables_equal
from eidos.testing.strategies import examples
from tests.lanes.conftest import LANES
from tests.lanes.helpers import lane_or_skip, run_or_skip

# Lanes that read local files; the database lanes do not (they say so and are skipped), nor does a lane
# that runs only Python functions (the free lane: these plans call none).
READERS = [name for name in LANES if name not in ("sqlite", "postgresql") and not registry.get(name).python_steps_only]


def write(path, **columns) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table(columns), path)


# ---------------------------------------------------------------- parquet folders, when the Flow is built

TYPES = {"Int32": pa.int32(), "Int64": pa.int64(), "Float64": pa.float64(), "String": pa.string()}


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(types=st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=4))
def test_files_of_one_folder_agree_or_the_build_says_where_they_differ(tmp_path_factory, types):
    folder = tmp_path_factory.mktemp("drift")
    for i, name in enumerate(types):
        values = pa.array([i + 1, i + 2], pa.int64()).cast(TYPES[name]) if name != "String" else pa.array(["a", "b"])
        write(folder / f"part-{i}.parquet", x=values)
    first = next((i, t) for i, t in enumerate(types) if t != types[0]) if len(set(types)) > 1 else None
    if first is None:
        flow = ei.read_parquet(folder)
        assert flow.schema["x"].name == types[0]
        return
    with pytest.raises(PlanError) as error:
        ei.read_parquet(folder)
    i, other = first
    assert (f"column 'x' is {types[0]} in {str(folder / 'part-0.parquet')!r} but {other} in "
            f"{str(folder / f'part-{i}.parquet')!r}") in str(error.value)


@pytest.mark.parametrize("second, words", [
    ({"x": pa.array([3.5])}, "column 'x' is Int64 in {a} but Float64 in {b}"),
    ({"y": pa.array([3])}, "column 'x' (Int64) of {a} is missing from {b}"),
    ({"x": pa.array([3]), "y": pa.array(["z"])}, "{b} holds column 'y' (String), which {a} does not"),
])
def test_a_file_that_differs_from_the_first_is_named(tmp_path, second, words):
    write(tmp_path / "d" / "a.parquet", x=pa.array([1, 2]))
    pq.write_table(pa.table(second), tmp_path / "d" / "b.parquet")
    with pytest.raises(PlanError) as error:
        ei.read_parquet(tmp_path / "d")
    a, b = repr(str(tmp_path / "d" / "a.parquet")), repr(str(tmp_path / "d" / "b.parquet"))
    assert words.format(a=a, b=b) in str(error.value)


@pytest.mark.parametrize("lane_name", READERS)
def test_column_order_may_differ_between_files(tmp_path, lane_name):
    write(tmp_path / "d" / "a.parquet", x=pa.array([1, 2]), s=pa.array(["a", "b"]), y=pa.array([10, 20]))
    pq.write_table(pa.table({"y": [30], "x": [3], "s": ["c"]}), tmp_path / "d" / "b.parquet")
    flow = ei.read_parquet(tmp_path / "d").select("x", "y", "s")
    expected = {"x": [1, 2, 3], "y": [10, 20, 30], "s": ["a", "b", "c"]}
    assert_tables_equal(run_or_skip(flow, lane_name), pa.table(expected), ordered=False)
    total = ei.read_parquet(tmp_path / "d").agg(x=col("x").sum(), y=col("y").sum())
    assert run_or_skip(total, lane_name).to_pydict() == {"x": [6], "y": [60]}


@pytest.mark.parametrize("lane_name", READERS)
def test_a_partition_a_filter_drops_still_raises_its_predicates_error(tmp_path, lane_name):
    """Partition pruning skips the files a filter drops whole, unless the filter can fail there (semantics 15)."""
    write(tmp_path / "d" / "k=1" / "a.parquet", x=pa.array([3, 4]))
    write(tmp_path / "d" / "k=2" / "a.parquet", x=pa.array([-(2**63)]))
    flow = ei.read_parquet(tmp_path / "d")
    assert run_or_skip(flow.filter((col("k") == 1) & (col("x") > 3)), lane_name).to_pydict() == {"x": [4], "k": [1]}
    with pytest.raises(ExecutionError, match="integer overflow"):
        run_or_skip(flow.filter((col("k") == 1) & (col("x").abs() > 3)), lane_name)


# ---------------------------------------------------------------- columns that differ only in case

@pytest.mark.parametrize("lane_name", READERS)
def test_columns_differing_only_in_case_are_told_apart(tmp_path, lane_name):
    write(tmp_path / "d" / "a.parquet", price=pa.array([1, 2]), PRICE=pa.array([10, 20]), Price=pa.array([100, 200]))
    # a second file with the columns in another order
    pq.write_table(pa.table({"PRICE": [30], "Price": [300], "price": [3]}), tmp_path / "d" / "b.parquet")
    flow = ei.read_parquet(tmp_path / "d")
    for name, want in (("PRICE", [10, 20, 30]), ("price", [1, 2, 3]), ("Price", [100, 200, 300])):
        assert sorted(run_or_skip(flow.select(name), lane_name).column(name).to_pylist()) == want
    both = flow.agg(a=col("price").sum(), b=col("PRICE").sum())
    assert run_or_skip(both, lane_name).to_pydict() == {"a": [6], "b": [60]}


# ---------------------------------------------------------------- files that change after the Flow is built

CHANGES = {
    "type": ({"x": pa.array([3.7, 4.4])}, "column 'x' is Int64 in the flow as built but Float64 in {b}"),
    "missing": ({"y": pa.array([3, 4])}, "column 'x' (Int64) of the flow as built is missing from {b}"),
    "extra": ({"x": pa.array([3, 4]), "z": pa.array([1.5, 2.5])},
              "{b} holds column 'z' (Float64), which the flow as built does not"),
    "narrower": ({"x": pa.array([3, 4], pa.int32())}, "column 'x' is Int64 in the flow as built but Int32 in {b}"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("lane_name", READERS)
def test_a_file_changed_after_the_build_stops_the_run(tmp_path, lane_name, change):
    write(tmp_path / "d" / "a.parquet", x=pa.array([1, 2]))
    write(tmp_path / "d" / "b.parquet", x=pa.array([3, 4]))
    flow = ei.read_parquet(tmp_path / "d").agg(s=col("x").sum())
    assert run_or_skip(flow, lane_name).to_pydict() == {"s": [10]}
    table, words = CHANGES[change]
    pq.write_table(pa.table(table), tmp_path / "d" / "b.parquet")
    with pytest.raises(PlanError) as error:
        flow.run(engine=lane_name, strict=True)
    b = repr(str(tmp_path / "d" / "b.parquet"))
    assert str(error.value) == (f"parquet {str(tmp_path / 'd')!r} (2 files) changed since the flow was built: "
                                f"{words.format(b=b)}; build the flow again to read the files as they are now")


@pytest.mark.parametrize("lane_name", READERS)
def test_a_file_gone_after_the_build_stops_the_run(tmp_path, lane_name):
    lane_or_skip(lane_name)
    write(tmp_path / "d" / "a.parquet", x=pa.array([1, 2]))
    write(tmp_path / "d" / "b.parquet", x=pa.array([3, 4]))
    flow = ei.read_parquet(tmp_path / "d")
    os.remove(tmp_path / "d" / "b.parquet")
    with pytest.raises(PlanError, match=r"changed since the flow was built: file '.*b\.parquet' is gone"):
        flow.run(engine=lane_name, strict=True)


def test_a_plan_read_from_json_is_checked_too(tmp_path):
    write(tmp_path / "a.parquet", x=pa.array([1, 2]))
    text = ei.read_parquet(tmp_path / "a.parquet").to_json()
    write(tmp_path / "a.parquet", x=pa.array([1.5, 2.5]))
    with pytest.raises(PlanError, match="column 'x' is Int64 in the flow as built but Float64 in"):
        ei.Flow.from_json(text).run()


@pytest.mark.parametrize("lane_name", READERS)
def test_stream_checks_the_files_too(tmp_path, lane_name):
    lane_or_skip(lane_name)
    write(tmp_path / "a.parquet", x=pa.array([1, 2]))
    flow = ei.read_parquet(tmp_path / "a.parquet")
    write(tmp_path / "a.parquet", x=pa.array(["1", "2"]))
    with pytest.raises(PlanError, match="column 'x' is Int64 in the flow as built but String in"):
        list(flow.stream(engine=lane_name))


# ---------------------------------------------------------------- CSV

def csv_past_the_block(path, late: str) -> None:
    """A column of integers for more than the block types are inferred from, then `late`."""
    with open(path, "w") as f:
        f.write("x,s\n")
        f.write("".join(f"{i % 7},row\n" for i in range(200_000)))
        f.write(f"{late},last\n")


@pytest.mark.parametrize("late, kind", [("0.7", "Float64"), ("2.5", "Float64"), ("7.0", "Float64"),
                                        ("1e3", "Float64"), ("abc", "String"), ("2024-01-02", "Date")])
@pytest.mark.parametrize("lane_name", READERS)
def test_a_csv_value_past_the_inferred_block_stops_every_lane(tmp_path, lane_name, late, kind):
    path = tmp_path / "late.csv"
    csv_past_the_block(path, late)
    flow = ei.read_csv(path)
    assert flow.schema["x"] == ei.Int64
    with pytest.raises(ExecutionError) as error:
        run_or_skip(flow.agg(total=col("x").sum()), lane_name)
    assert str(error.value) == (
        f"cannot read csv {str(path)!r}: column 'x' holds {late!r} (a {kind}) past the first block (1 MiB), "
        "from which eidos inferred Int64; make the file's first rows show the type the column holds "
        "(e.g. 1.0 for a float), or convert it to parquet with the types you mean")


@pytest.mark.parametrize("lane_name", READERS)
def test_csv_values_that_fit_read_alike_on_every_lane(tmp_path, lane_name):
    path = tmp_path / "fits.csv"
    csv_past_the_block(path, "-12")
    flow = ei.read_csv(path).agg(total=col("x").sum(), n=ei.count())
    assert run_or_skip(flow, lane_name).to_pydict() == {"total": [sum(i % 7 for i in range(200_000)) - 12], "n": [200_001]}


@pytest.mark.parametrize("lane_name", READERS)
def test_a_csv_header_changed_after_the_build_stops_the_run(tmp_path, lane_name):
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,10\n2,20\n")
    flow = ei.read_csv(path).select("a")
    assert run_or_skip(flow, lane_name).to_pydict() == {"a": [1, 2]}
    path.write_text("b,a\n10,1\n20,2\n")
    with pytest.raises(PlanError) as error:
        flow.run(engine=lane_name, strict=True)
    assert str(error.value) == (f"csv {str(path)!r} changed since the flow was built: its header is 'b', 'a', the "
                                "flow was built on 'a', 'b'; build the flow again to read the files as they are now")
