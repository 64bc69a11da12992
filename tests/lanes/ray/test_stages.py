"""stages.py alone (no Ray): which exchange each node gets, how many tasks each stage has, and explain's lines."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import eidos as ei
from eidos import col
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.sources import ArrowSource, ParquetSource
from eidos.lanes.ray import stages as S

BIG = 1 << 40


def cut(flow: ei.Flow, partitions: int = 3, *, broadcast: int = BIG, gather: int = BIG, partials=True) -> S.Stage:
    return S.cut(flow.plan.optimized, partitions, broadcast_bytes=broadcast, gather_bytes=gather, partials=partials)


def rows(n: int) -> ei.Flow:
    return ei.from_arrow(pa.table({"k": pa.array([i % 3 for i in range(n)], pa.int64()),
                                   "v": pa.array(range(n), pa.int64())}))


def test_narrow_nodes_stay_in_the_scan_stage_split_into_slices():
    stage = cut(rows(10).filter(col("v") > 2).with_columns(w=col("v") * 2))
    assert stage.what == "scan" and stage.tasks == 3 and not stage.inputs
    assert [s.table.num_rows for s in stage.splits] == [3, 3, 4]
    assert [type(n).__name__ for n in stage.plan.walk()] == ["Project", "Filter", "Scan"]
    assert cut(rows(2), 8).tasks == 2 and cut(rows(0), 8).tasks == 1   # never more slices than rows


def test_a_window_gathers_its_input_into_one_task():
    stage = cut(rows(10).filter(col("v") > 2).with_columns(s=col("v").cum_sum().over("k")))
    (below, how), = stage.inputs
    assert stage.tasks == 1 and stage.single and how.how == S.GATHER and below.what == "scan"
    assert isinstance(stage.plan, N.Project)


def test_an_aggregate_moves_partial_states_hashed_by_the_keys_where_it_can():
    stage = cut(rows(10).group_by((col("k") + 1).alias("k1")).agg(s=col("v").sum(), m=col("v").mean()), 4)
    (below, how), = stage.inputs
    assert stage.what == "combine" and stage.tasks == 4 and below.what == "scan"
    assert how.how == S.PARTIAL and how.partitions == 4 and how.keys == (E.Column("k1"),)
    assert isinstance(how.aggregate, N.Aggregate) and isinstance(stage.plan.source, S.Input)
    whole = cut(rows(10).agg(s=col("v").sum()))   # no keys: every task's states to one combining task
    assert whole.single and whole.tasks == 1 and whole.inputs[0][1].partitions == 1
    assert cut(rows(10).group_by("k").agg(s=col("v").sum()), partials=False).inputs[0][1].how == S.HASH


def test_other_aggregates_and_distinct_hash_their_rows_by_the_keys():
    stage = cut(rows(10).group_by(col("k") + 1).agg(s=col("v").n_unique()), 4)   # no combinable state
    (below, how), = stage.inputs
    assert stage.what == "aggregate" and stage.tasks == 4 and below.what == "scan"
    assert how.how == S.HASH and how.partitions == 4 and S._key_text(how.keys[0]) == "k + 1"
    assert isinstance(stage.plan, N.Aggregate)
    assert cut(rows(10).agg(s=col("v").std())).inputs[0][1].how == S.GATHER
    distinct = cut(rows(10).distinct())
    assert distinct.inputs[0][1].keys == (E.Column("k"), E.Column("v"))


def test_a_one_task_stage_keeps_the_single_input_nodes_above_it():
    stage = cut(rows(10).agg(s=col("v").var()).with_columns(t=col("s") + 1).sort("t").limit(1))
    assert stage.single and stage.tasks == 1 and stage.inputs[0][1].how == S.GATHER
    assert [type(n).__name__ for n in stage.plan.walk()] == ["Limit", "Sort", "Project", "Aggregate", "Scan"]
    mapped = cut(rows(4).map_batches(lambda b: b, schema={"k": ei.Int64, "v": ei.Int64}).filter(col("v") > 1))
    assert mapped.what == "gather" and [type(n).__name__ for n in mapped.plan.walk()] == ["Filter", "MapBatches", "Scan"]


def test_union_hands_on_its_inputs_partitions_and_narrow_nodes_run_in_each():
    stage = cut(rows(4).union(rows(6)).filter(col("v") > 1), 2)
    assert stage.plan is None and stage.tasks == 4
    assert [how.how for _, how in stage.inputs] == [S.FORWARD, S.FORWARD]
    assert all(isinstance(s.plan, N.Filter) for s, _ in stage.inputs)


def test_limit_takes_its_first_rows_in_every_partition_then_the_final_ones_in_one_task():
    stage = cut(rows(10).limit(2, offset=3))
    (below, how), = stage.inputs
    assert stage.single and how.how == S.GATHER
    assert isinstance(below.plan, N.Limit) and (below.plan.n, below.plan.offset) == (5, 0)
    assert (stage.plan.n, stage.plan.offset) == (2, 3)


def test_sort_gathers_when_small_and_range_partitions_when_not():
    assert cut(rows(10).sort("v")).single
    stage = cut(rows(10).sort("v", descending=True), 3, gather=0)
    (_, how), = stage.inputs
    assert stage.tasks == 3 and how.how == S.RANGE and how.sort.keys[0].descending


LEFT = ei.from_arrow(pa.table({"a": pa.array([1, 2], pa.int32()), "x": ["p", "q"]}))
RIGHT = ei.from_arrow(pa.table({"b": pa.array([1, 3], pa.int64()), "y": [1.0, 2.0]}))


@pytest.mark.parametrize("how, broadcast, exchanges", [
    ("inner", BIG, (S.FORWARD, S.BROADCAST)),
    ("left", BIG, (S.FORWARD, S.BROADCAST)),
    ("right", BIG, (S.BROADCAST, S.FORWARD)),
    ("full", BIG, (S.HASH, S.HASH)),
    ("inner", 0, (S.HASH, S.HASH)),
    ("semi", 0, (S.FORWARD, S.BROADCAST)),   # keeps the left order: broadcast whatever the size
    ("anti", 0, (S.FORWARD, S.BROADCAST)),
])
def test_join_broadcasts_a_small_side_else_hashes_both_on_the_common_key_type(how, broadcast, exchanges):
    stage = cut(LEFT.join(RIGHT, left_on="a", right_on="b", how=how), 3, broadcast=broadcast)
    assert tuple(h.how for _, h in stage.inputs) == exchanges
    if exchanges == (S.HASH, S.HASH):
        assert stage.tasks == 3 and all(h.types == (T.Int64,) for _, h in stage.inputs)
    else:
        forwarded = next(s for s, h in stage.inputs if h.how == S.FORWARD)
        assert stage.tasks == forwarded.tasks


def test_parquet_splits_by_file_groups_else_by_row_groups(tmp_path):
    table = pa.table({"v": list(range(100))})
    for i in range(5):
        pq.write_table(table, tmp_path / f"part-{i}.parquet")
    many = ei.read_parquet(str(tmp_path / "part-*.parquet")).plan.source
    assert [len(s.files) for s in S.split(many, None, 2)] == [2, 3]
    assert [s.files for s in S.split(many, None, 8)] == [(f,) for f in many.files]
    pq.write_table(table, tmp_path / "one.parquet", row_group_size=10)
    one = ei.read_parquet(str(tmp_path / "one.parquet")).plan.source
    splits = S.split(one, None, 3)
    assert [s.groups for s in splits] == [(0, 1, 2), (3, 4, 5), (6, 7, 8, 9)]
    assert isinstance(one, ParquetSource) and not isinstance(S.split(one, None, 1)[0], S.RowGroups)


def test_explain_lists_the_stages_their_tasks_and_exchanges():
    flow = LEFT.join(RIGHT, left_on="a", right_on="b").group_by("x").agg(n=ei.count()).sort("x")
    lines = S.describe(cut(flow, 2, broadcast=0), 2, "a test cluster (1 node, 2 CPUs)")
    assert lines[0].startswith("stages: 5, run as Ray tasks on a test cluster (1 node, 2 CPUs)")
    text = "\n".join(lines)
    for part in ("  s5 sort, 1 task: Sort [x nulls last]",
                 "    <- gather: s4 combine, 2 tasks: Aggregate [x] n=count() (combining the partial states)",
                 "      <- partial states, hash [x] into 2: s3 join, 2 tasks: Join inner [a = b]",
                 "        <- hash [a] into 2: s1 scan, 2 tasks (2 slices): Scan arrow table",
                 "        <- hash [b] into 2: s2 scan, 2 tasks (2 slices): Scan arrow table"):
        assert part in text, text


def test_estimated_bytes_reads_the_columns_a_scan_keeps():
    source = ArrowSource.of(pa.table({"a": list(range(1000)), "b": list(range(1000))}))
    assert S.estimated_bytes(N.Scan(source, ("a",))) == source.estimated_bytes // 2
