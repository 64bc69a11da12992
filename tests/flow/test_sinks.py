"""Sinks are atomic: a complete file or none; an earlier file survives a failure."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos.errors import ExecutionError, PlanError
from eidos.hal import registry
from eidos.hal.lane import Backend
from eidos.testing.strategies import examples


class Batches(Backend):
    """Yields the plan's rows in two batches, optionally failing between them."""

    kind = "vector"

    def __init__(self, name, fail_midway=False):
        self.name, self.fail_midway = name, fail_midway

    def execute(self, plan):
        return pa.Table.from_batches(list(self.execute_stream(plan)))

    def execute_stream(self, plan):
        schema = plan.schema.to_arrow()
        yield pa.record_batch([pa.array([1, 2], t) for t in schema.types], schema=schema)
        if self.fail_midway:
            raise OSError("disk on fire")
        yield pa.record_batch([pa.array([3], t) for t in schema.types], schema=schema)


@pytest.fixture
def lanes():
    registry.register_backend("batches", Batches("batches"))
    registry.register_backend("failing", Batches("failing", fail_midway=True))
    yield
    registry.unregister_backend("batches")
    registry.unregister_backend("failing")


@pytest.fixture
def flow():
    return ei.from_pydict({"a": [0]})


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_complete_write(lanes, flow, tmp_path, fmt):
    target = tmp_path / f"out.{fmt}"
    getattr(flow, f"write_{fmt}")(target, engine="batches")
    table = pq.read_table(target) if fmt == "parquet" else pcsv.read_csv(target)
    assert table.column("a").to_pylist() == [1, 2, 3]
    assert os.listdir(tmp_path) == [f"out.{fmt}"]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_failure_midway_leaves_no_partial_file(lanes, flow, tmp_path, fmt):
    target = tmp_path / f"out.{fmt}"
    with pytest.raises(ExecutionError, match="lane 'failing' failed: OSError: disk on fire"):
        getattr(flow, f"write_{fmt}")(target, engine="failing")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_failure_keeps_the_earlier_file(lanes, flow, tmp_path, fmt):
    target = tmp_path / f"out.{fmt}"
    target.write_bytes(b"precious")
    with pytest.raises(ExecutionError):
        getattr(flow, f"write_{fmt}")(target, engine="failing")
    assert target.read_bytes() == b"precious"
    assert os.listdir(tmp_path) == [f"out.{fmt}"]


def test_missing_folder_is_a_plan_error(lanes, flow, tmp_path):
    with pytest.raises(PlanError, match="does not exist"):
        flow.write_parquet(tmp_path / "nope" / "out.parquet", engine="batches")


def test_a_folder_is_not_a_file_name(lanes, flow, tmp_path):
    with pytest.raises(PlanError, match="it is a folder"):
        flow.write_parquet(tmp_path, engine="batches")


def test_a_folder_no_file_can_be_made_in_is_a_plan_error(lanes, flow):
    # /proc exists but takes no new files, whoever runs the test (root included)
    with pytest.raises(PlanError, match=r"cannot write '/proc/out.csv': cannot create a file in '/proc'"):
        flow.write_csv("/proc/out.csv", engine="batches")


# ---------------------------------------------------------------- writer options

def test_parquet_compression_and_row_groups(tmp_path):
    flow = ei.from_pydict({"a": list(range(10)), "s": [str(i) for i in range(10)]})
    for compression, level in [("zstd", 9), ("gzip", 1), ("snappy", None), ("uncompressed", None), ("lz4", None)]:
        target = tmp_path / f"{compression}.parquet"
        flow.write_parquet(target, compression=compression, compression_level=level, row_group_size=3)
        meta = pq.read_metadata(target)
        assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [3, 3, 3, 1]
        codec = meta.row_group(0).column(0).compression
        assert codec == ("UNCOMPRESSED" if compression == "uncompressed" else compression.upper())
        assert ei.read_parquet(target).run().to_pydict() == flow.run().to_pydict()


def test_row_groups_gather_small_batches(lanes, flow, tmp_path):
    flow.write_parquet(tmp_path / "t.parquet", engine="batches", row_group_size=2)
    meta = pq.read_metadata(tmp_path / "t.parquet")
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [2, 1]


def test_partitioned_parquet_reads_back(tmp_path):
    flow = ei.from_pydict({"k": ["a", "b/c", None, "a"], "n": [1, 2, 3, None], "x": [0.5, 1.5, 2.5, 3.5]})
    target = tmp_path / "out"
    flow.write_parquet(target, partition_by=["k", "n"])
    assert sorted(os.listdir(target)) == ["k=__HIVE_DEFAULT_PARTITION__", "k=a", "k=b%2Fc"]
    back = ei.read_parquet(target)
    assert back.schema == ei.Schema([("x", ei.Float64), ("k", ei.String), ("n", ei.Int64)])
    assert back.sort("x").run().to_pydict() == {"x": [0.5, 1.5, 2.5, 3.5], "k": ["a", "b/c", None, "a"],
                                                "n": [1, 2, 3, None]}
    ei.from_pydict({"k": ["z"], "x": [9.0]}).write_parquet(target, partition_by="k")   # replaces the folder
    assert ei.read_parquet(target).run().to_pydict() == {"x": [9.0], "k": ["z"]}
    assert os.listdir(tmp_path) == ["out"]


def test_partitioned_write_failing_midway_keeps_the_old_folder(lanes, flow, tmp_path):
    target = tmp_path / "out"
    ei.from_pydict({"a": [7], "b": [1]}).write_parquet(target, partition_by="b")
    before = sorted(os.walk(target))
    with pytest.raises(ExecutionError, match="disk on fire"):
        ei.from_pydict({"a": [0], "b": [0]}).write_parquet(target, engine="failing", partition_by="b")
    assert sorted(os.walk(target)) == before and os.listdir(tmp_path) == ["out"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(PlanError, match="it is a file; partition_by writes a folder"):
        ei.from_pydict({"a": [0], "b": [0]}).write_parquet(tmp_path / "file", partition_by="a", engine="batches")


@pytest.mark.parametrize("bad, words", [
    ({"compression": "lzo"}, "compression must be one of zstd"),
    ({"compression": "snappy", "compression_level": 3}, "compression_level is a whole number for zstd"),
    ({"row_group_size": 0}, "row_group_size is a number of rows >= 1"),
    ({"partition_by": "nope"}, "partition_by names column 'nope'"),
    ({"partition_by": ["a"]}, "not all"),
])
def test_bad_parquet_options_are_plan_errors(flow, tmp_path, bad, words):
    with pytest.raises(PlanError, match=words):
        flow.write_parquet(tmp_path / "t.parquet", **bad)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("bad, words", [
    ({"separator": ";;"}, "separator must be one character"),
    ({"null_value": 'x"'}, "null_value is text without quotes"),
    ({"quote_style": "necessary"}, "quote_style must be one of non_numeric, always, never"),
    ({"date_format": 3}, "date_format is a strftime format"),
])
def test_bad_csv_options_are_plan_errors(flow, tmp_path, bad, words):
    with pytest.raises(PlanError, match=words):
        flow.write_csv(tmp_path / "t.csv", **bad)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(separator=st.sampled_from([",", ";", "\t", "|"]), null=st.sampled_from(["", "NA", "\\N"]),
       header=st.booleans(), style=st.sampled_from(["non_numeric", "always"]),
       rows=st.lists(st.tuples(st.none() | st.integers(-2**63, 2**63 - 1),
                               st.none() | st.text("ab ,;|\"'\n", min_size=1, max_size=5)), min_size=1, max_size=6))
def test_csv_written_with_options_reads_back_with_them(tmp_path_factory, separator, null, header, style, rows):
    from hypothesis import assume

    assume(all(s not in (null, "") for _, s in rows))
    names = ["i", "s"] if header else ["f0", "f1"]
    flow = ei.from_arrow(pa.table({names[0]: pa.array([r[0] for r in rows], pa.int64()),
                                   names[1]: pa.array([r[1] for r in rows], pa.string())}))
    path = tmp_path_factory.mktemp("w") / "t.csv"
    flow.write_csv(path, separator=separator, null_value=null, include_header=header, quote_style=style)
    back = ei.read_csv(path, separator=separator, null_values=null or None, has_header=header,
                       schema_overrides={names[0]: ei.Int64, names[1]: ei.String})
    assert back.run().to_pydict() == flow.run().to_pydict()


def test_csv_never_quoting_refuses_a_value_that_needs_quotes(tmp_path):
    with pytest.raises(ExecutionError):
        ei.from_pydict({"s": ["a,b"]}).write_csv(tmp_path / "t.csv", quote_style="never")
    assert os.listdir(tmp_path) == []
