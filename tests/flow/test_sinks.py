"""Sinks are atomic: a complete file or none; an earlier file survives a failure."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

import eidos as ei
from eidos.errors import ExecutionError, PlanError
from eidos.hal import registry
from eidos.hal.lane import Backend


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
