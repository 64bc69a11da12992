"""Readers with options, globs, NDJSON and Arrow IPC: every lane that reads files reads the same values as the
reference lane from the same files, and a plan over them keeps its options through JSON."""

from __future__ import annotations

import csv
import io
import json
import re

import pyarrow as pa
import pyarrow.feather as feather
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col
from eidos.errors import EidosError, ExecutionError, PlanError, UnsupportedError
from eidos.ir import nodes as N
from eidos.ir.sources import ArrowSource
from eidos.testing.compare import assert_tables_equal
from eidos.testing.strategies import examples, flows, profile
from tests.lanes.helpers import lane_or_skip, replace_scans, run_or_skip
from tests.lanes.test_files import READERS

NULLS = ["", "NA", "null"]


@st.composite
def csv_cases(draw):
    """(file text, read_csv options, the table it must read as)."""
    separator = draw(st.sampled_from([",", ";", "\t", "|"]))
    quote = draw(st.sampled_from(['"', "'", None]))
    null = draw(st.sampled_from(NULLS))
    skip = draw(st.integers(0, 2))
    header = draw(st.booleans())
    n = draw(st.integers(1, 6))
    letters = "abcxyz é" + (separator + (quote or "") if quote else "")
    text = st.text(letters, min_size=1, max_size=6).filter(lambda s: s not in NULLS and s.strip() == s)
    ints = draw(st.lists(st.none() | st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n))
    floats = draw(st.lists(st.none() | st.floats(allow_nan=False, allow_infinity=True), min_size=n, max_size=n))
    strings = draw(st.lists(st.none() | text, min_size=n, max_size=n))
    out = io.StringIO()
    out.write("".join("# skipped\n" for _ in range(skip)))
    dialect = {"quotechar": quote} if quote else {"quoting": csv.QUOTE_NONE}
    writer = csv.writer(out, delimiter=separator, lineterminator="\n", **dialect)
    names = ["i", "f", "s"] if header else ["f0", "f1", "f2"]
    if header:
        writer.writerow(names)
    for row in zip(ints, floats, strings):
        writer.writerow([null if v is None else repr(v) if isinstance(v, float) else v for v in row])
    options = {"separator": separator, "quote_char": quote, "null_values": null or None, "skip_rows": skip,
               "has_header": header, "schema_overrides": {names[0]: ei.Int64, names[1]: ei.Float64,
                                                          names[2]: ei.String}}
    expected = pa.table({names[0]: pa.array(ints, pa.int64()), names[1]: pa.array(floats, pa.float64()),
                         names[2]: pa.array(strings, pa.string())})
    return out.getvalue(), options, expected


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=csv_cases())
@pytest.mark.parametrize("lane_name", READERS)
def test_csv_options_read_back_what_was_written_on_every_lane(tmp_path_factory, lane_name, case):
    text, options, expected = case
    path = tmp_path_factory.mktemp("csv") / "data.csv"
    path.write_text(text, encoding="utf-8")
    flow = ei.read_csv(path, **options)
    assert_tables_equal(run_or_skip(flow, lane_name), expected, ordered=True)
    assert_tables_equal(run_or_skip(ei.Flow.from_json(flow.to_json()), lane_name), expected, ordered=True)


def test_csv_inference_length_and_null_values(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,x\nNA,y\n2.5,-\n")
    assert ei.read_csv(path, infer_schema_length=1).schema == ei.Schema([("a", ei.Int64), ("b", ei.String)])
    assert ei.read_csv(path, infer_schema_length=0).schema == ei.Schema([("a", ei.String), ("b", ei.String)])
    flow = ei.read_csv(path, null_values=["NA", "-"], infer_schema_length=None)
    assert flow.schema == ei.Schema([("a", ei.Float64), ("b", ei.String)])
    assert flow.run().to_pydict() == {"a": [1.0, None, 2.5], "b": ["x", "y", None]}
    with pytest.raises(ExecutionError, match=r"column 'a' holds 'NA' .* past the first 1 rows, from which eidos "
                                             "inferred Int64"):
        ei.read_csv(path, infer_schema_length=1).run(engine="reference")


@pytest.mark.parametrize("lane_name", READERS)
def test_a_glob_of_csv_files_reads_as_one_table(tmp_path, lane_name):
    for i in range(3):
        (tmp_path / "in" / f"d={i}").mkdir(parents=True)
        (tmp_path / "in" / f"d={i}" / f"part{i}.csv").write_text(f"k,v\nk{i},{i}\nz,{i * 10}\n")
    (tmp_path / "in" / "notes.txt").write_text("not data")
    for path in (tmp_path / "in" / "*" / "*.csv", tmp_path / "in"):
        flow = ei.read_csv(path).group_by("k").agg(total=col("v").sum()).sort("k")
        assert run_or_skip(flow, lane_name).to_pydict() == {"k": ["k0", "k1", "k2", "z"], "total": [0, 1, 2, 30]}


def test_csv_files_of_a_glob_share_a_header(tmp_path):
    (tmp_path / "a.csv").write_text("x,y\n1,2\n")
    (tmp_path / "b.csv").write_text("y,x\n1,2\n")
    with pytest.raises(PlanError, match=re.escape(f"{str(tmp_path / 'b.csv')!r} has the header 'y', 'x'")):
        ei.read_csv(tmp_path / "*.csv")
    with pytest.raises(PlanError, match="no such file"):
        ei.read_csv(tmp_path / "none" / "*.csv")


def test_read_csv_refuses_bad_options(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a\n1\n")
    for bad, words in [({"separator": ";;"}, "separator must be one character"),
                       ({"skip_rows": -1}, "skip_rows must be a whole number"),
                       ({"infer_schema_length": "all"}, "infer_schema_length must be"),
                       ({"null_values": [1]}, "null_values must be a string"),
                       ({"schema_overrides": {"b": ei.Int64}}, "names column 'b', which csv"),
                       ({"schema_overrides": {"a": int}}, "give an eidos dtype"),
                       ({"separator": ";", "delimiter": "|"}, "not both")]:
        with pytest.raises(PlanError, match=words):
            ei.read_csv(path, **bad)


# ---------------------------------------------------------------- NDJSON and Arrow IPC

ROWS = [{"id": 1, "name": "ann", "score": 1.5, "ok": True, "day": "2024-01-02"},
        {"id": 2, "name": None, "score": None, "ok": False},
        {"id": None, "name": "ß é", "score": -0.0, "ok": None, "day": "x", "extra": [1]}]


@pytest.mark.parametrize("lane_name", READERS)
def test_ndjson_and_ipc_read_alike_on_every_lane(tmp_path, lane_name):
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "a.ndjson").write_text("".join(json.dumps(r) + "\n" for r in ROWS[:2]))
    (tmp_path / "j" / "b.jsonl").write_text(json.dumps(ROWS[2]) + "\n")
    ndjson = ei.read_ndjson(tmp_path / "j")
    assert ndjson.schema == ei.Schema([("id", ei.Int64), ("name", ei.String), ("score", ei.Float64),
                                       ("ok", ei.Boolean), ("day", ei.String)])
    table = pa.table({"id": pa.array([1, 2, None], pa.int32()), "d": pa.array([1.5, None, 2.0]),
                      "t": pa.array([None, "x", "y"])})
    feather.write_feather(table.slice(0, 2), tmp_path / "a.arrow")
    feather.write_feather(table.slice(2), tmp_path / "b.feather", compression="uncompressed")
    ipc = ei.read_ipc(tmp_path / "*.*")
    assert ipc.schema == ei.Schema([("id", ei.Int32), ("d", ei.Float64), ("t", ei.String)])
    for flow in (ndjson, ndjson.filter(col("id") > 1).select("name", "score"), ipc,
                 ipc.filter(col("d").is_not_null()).select("t")):
        assert_tables_equal(run_or_skip(flow, lane_name), flow.run(engine="reference"), ordered=True)
        assert_tables_equal(run_or_skip(ei.Flow.from_json(flow.to_json()), lane_name), flow.run(engine="reference"), ordered=True)
    assert ndjson.run(engine="reference").column("day").to_pylist() == ["2024-01-02", None, "x"]
    assert ipc.run(engine="reference").to_pydict() == table.to_pydict()


def test_ndjson_values_of_another_type_and_ipc_drift_are_errors(tmp_path):
    path = tmp_path / "e.ndjson"
    path.write_text('{"a": 1}\n{"a": "x"}\n')
    with pytest.raises(PlanError, match="cannot read ndjson .* changed from number to string"):
        ei.read_ndjson(path)
    path.write_text('{"a": 1}\n')
    flow = ei.read_ndjson(path)
    path.write_text('{"a": 1}\n{"a": "x"}\n')
    with pytest.raises(ExecutionError, match="cannot read ndjson"):
        flow.run(engine="reference")
    path.write_text('{"a": 1}\n')
    with pytest.raises(PlanError, match="names column 'b'"):
        ei.read_ndjson(path, schema_overrides={"b": ei.Int64})
    feather.write_feather(pa.table({"a": [1]}), tmp_path / "t.arrow")
    ipc = ei.read_ipc(tmp_path / "t.arrow")
    feather.write_feather(pa.table({"a": ["x"]}), tmp_path / "t.arrow")
    with pytest.raises(PlanError, match="column 'a' is Int64 in the flow as built but String"):
        ipc.run()
    (tmp_path / "bad.arrow").write_text("not arrow")
    with pytest.raises(PlanError, match="read_ipc reads Arrow IPC files"):
        ei.read_ipc(tmp_path / "bad.arrow")


# ---------------------------------------------------------------- generated plans over files

@pytest.mark.parametrize("lane_name", READERS)
@settings(parent=profile(), max_examples=max(4, profile().max_examples // 5))
@given(data=st.data())
def test_generated_plans_over_ipc_files(lane_name, data, tmp_path_factory):
    """The cross-lane suite's generated plans, their tables written as Arrow IPC files and read back with
    read_ipc: every lane that reads files agrees with the reference lane on the in-memory plan."""
    lane = lane_or_skip(lane_name)
    gen = data.draw(flows(coverage=lane.coverage), label="generated")
    folder = tmp_path_factory.mktemp("ipc")
    done: dict = {}

    def swap(scan: N.Scan) -> N.Node:
        if not isinstance(scan.source, ArrowSource):
            return scan
        if scan.source not in done:
            path = folder / f"t{len(done)}.arrow"
            feather.write_feather(scan.source.table, path, compression="uncompressed")
            done[scan.source] = ei.read_ipc(path).plan.source
        return N.Scan(done[scan.source], scan.columns)

    flow = ei.Flow(replace_scans(gen.flow.plan, swap))
    assume(not lane.supports(flow.plan))
    try:
        expected = gen.flow.run(engine="reference", strict=True)
    except ExecutionError:
        with pytest.raises(EidosError):
            flow.run(engine=lane_name, strict=True)
        return
    try:
        got = flow.run(engine=lane_name, strict=True)
    except UnsupportedError:
        assume(False)
    assert_tables_equal(got, expected, ordered=gen.ordered, float_rel=1e-6)


@pytest.mark.parametrize("lane_name", READERS)
def test_ndjson_lists_read_alike(tmp_path, lane_name):
    path = tmp_path / "l.ndjson"
    path.write_text('{"a": [1, 2], "b": 1}\n{"a": null, "b": 2}\n{"a": [], "b": 3}\n')
    flow = ei.read_ndjson(path)
    assert flow.schema == ei.Schema([("a", ei.List(ei.Int64)), ("b", ei.Int64)])
    assert run_or_skip(flow, lane_name).to_pydict() == {"a": [[1, 2], None, []], "b": [1, 2, 3]}
