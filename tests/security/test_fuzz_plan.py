"""Fuzzing Flow.from_json: any document loads or raises an EidosError (a PlanError for the loader),
never another exception, never a side effect; a plan that loads explains and runs (on the
reference lane) or raises an EidosError."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import sqlite3
import sys

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import eidos as ei
from eidos import col, lit, when
from eidos.errors import EidosError, PlanError
from eidos.ir import dtypes as T
from eidos.ir import functions as F
from eidos.ir import nodes as N
from eidos.ir import sources as S
from eidos.testing.strategies import batches_identity, udf_is_none, udf_sign
from tests.security.fuzz import FUZZ, Watch, as_text, deeply_nested, mutated, truncated, vocabulary

# Names a plan may use, for mutations that keep a document plausible.
WORDS = [*F.ALL, *T.KINDS, "Null", "Decimal(38, 0)", "Decimal(1, 1)", *N.JOIN_KINDS, "Scan", "Filter", "Project",
         "Aggregate", "Join", "Sort", "Limit", "Distinct", "Union", "MapBatches", "parquet", "csv", "arrow", "sql",
         "eidos.testing.strategies:batches_reversed", "eidos.testing.strategies:udf_is_none", 0, 1, 2, 3, -1, 1.5]


def _seeds(folder) -> list[dict]:
    """Real plans: every node, expression form, source kind and literal type."""
    t = ei.from_pydict({
        "i": [1, None, -3, 2**40], "f": [0.5, float("nan"), None, -2.0], "s": ["ab", None, "é", ""],
        "b": [True, False, None, True], "d": [dt.date(2024, 2, 29), None, dt.date(1970, 1, 1), dt.date(9999, 12, 31)],
        "ts": [dt.datetime(2024, 1, 1, 12), None, dt.datetime(1999, 12, 31), dt.datetime(2000, 1, 1)],
        "m": [decimal.Decimal("1.50"), None, decimal.Decimal("-2.25"), decimal.Decimal("0.00")],
    })
    u = ei.from_pydict({"i": [1, 2, 3], "w": ["x", "y", None]})
    pa_path, csv_path = str(folder / "t.parquet"), str(folder / "t.csv")
    u.write_parquet(pa_path)
    u.write_csv(csv_path)
    db = str(folder / "t.db")
    with sqlite3.connect(db) as con:
        con.executescript("create table t (i integer, w text); insert into t values (1, 'x'), (2, null)")
    con.close()
    flows = [
        t.filter((col("i") > 0) & col("s").is_not_null() | ~col("b"))
         .with_columns(j=col("i") * 2 + 1, g=(col("f") / 3).round(1), h=col("i") // 2 % 5, k=-col("f").abs(),
                       p=col("f").sqrt().exp().log(), q=col("i").cast(ei.Float32), c=col("s").str.to_upper(),
                       n=col("s").str.slice(1, 2), z=col("s").str.len(), y=col("d").dt.year(),
                       e=col("s").str.contains("a") | col("s").str.like("%b_") | col("s").str.starts_with("x"),
                       w=when(col("i") > 1).then(lit("big")).when(col("i") < 0).then("neg").otherwise(None),
                       v=col("i").is_in([1, 2, 2**62]), r=col("f").is_between(-1.0, 1.5), x=col("i").fill_null(0),
                       o=ei.udf(udf_sign, ei.Int8)("f"), t=ei.udf(udf_is_none, ei.Boolean)(col("s")),
                       mm=col("m") * 2 + lit(decimal.Decimal("0.25")), dd=col("d") >= ei.date(2000, 1, 1),
                       tt=col("ts") < lit(dt.datetime(2020, 5, 17, 3, 4, 5)), big=lit(2**64 - 1, ei.UInt64),
                       inf=lit(float("inf")), nan=lit(float("nan"), ei.Float32)),
        t.group_by("b").agg(n=ei.count(), s=col("i").sum(), a=col("f").mean(), lo=col("d").min(),
                            hi=col("ts").max(), c=col("s").count(), u=col("s").n_unique(), sd=col("f").std(),
                            va=col("i").var(), m=col("m").sum())
         .sort("b", "n", descending=[True, False], nulls_last=True).limit(3),
        t.join(u, on="i", how="left").join(u.rename({"w": "w2"}), on="i", how="semi").distinct()
         .drop("f").union(t.join(u, on="i", how="inner").drop("f")),
        t.select("i").join(u.select("w"), how="cross").agg(n=ei.count()),
        u.map_batches(batches_identity, schema={"i": ei.Int64, "w": ei.String}).limit(2),
        ei.read_parquet(pa_path).join(ei.read_csv(csv_path), on="i", how="full").sort("i"),
        ei.read_sql(f"sqlite:///{db}", table="t").filter(col("i") > 1),
        ei.read_sql(f"sqlite:///{db}", query="select i from t").select(j=col("i") + 1),
    ]
    return [json.loads(f.to_json()) for f in flows]


def _leaves(seeds: list[dict]) -> list:
    """Parts of real plans to graft elsewhere: expressions, nodes, sources."""
    out = []
    for doc in seeds:
        plan = doc["plan"]
        out += [plan, plan.get("input", plan)]
        if plan["node"] == "Project":
            out += [e for _, e in plan["columns"][:8]]
    return out


class Fuzz(tuple):
    def __repr__(self) -> str:  # Hypothesis prints its arguments; the seeds are long
        return "<seed plans>"


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory):
    folder, work = tmp_path_factory.mktemp("plans"), tmp_path_factory.mktemp("work")
    seeds = _seeds(folder)
    marker = work / "imported"
    old_cwd, old_marker = os.getcwd(), os.environ.get("EIDOS_IMPORT_MARKER")
    os.chdir(work)  # relative paths a plan names land here, where nothing may appear
    os.environ["EIDOS_IMPORT_MARKER"] = str(marker)
    sys.modules.pop("tests.data.import_marker", None)
    for doc in seeds:  # every lane's lazy imports happen now, not inside a watched example
        ei.Flow.from_json(doc).explain()
    watch = Watch([folder, work])
    try:
        with watch.patched():
            yield Fuzz((seeds, _leaves(seeds), watch, folder, vocabulary(seeds) + WORDS))
    finally:
        os.chdir(old_cwd)
        if old_marker is None:
            os.environ.pop("EIDOS_IMPORT_MARKER", None)
        else:
            os.environ["EIDOS_IMPORT_MARKER"] = old_marker


def _runnable(plan: N.Node, folder) -> bool:
    """Sources the reference lane may read in a test: in-memory data and the seed files."""
    for node in plan.walk():
        if isinstance(node, N.Scan):
            s = node.source
            if isinstance(s, S.SqlSource):
                return False
            if isinstance(s, (S.ParquetSource, S.CsvSource)) and not all(
                    os.path.dirname(p) == str(folder) for p in (s.path, *getattr(s, "files", ()))):
                return False
    return True


def check(doc_or_text, watch: Watch, folder) -> None:
    """Load, explain, run: only EidosErrors, no side effects."""
    with watch.check():
        try:
            flow = ei.Flow.from_json(doc_or_text)
        except PlanError:
            return
        try:
            flow.explain()
        except EidosError:
            pass
        if _runnable(flow.plan, folder):
            try:
                flow.run(engine="reference")
            except EidosError:
                pass


@FUZZ
@given(data=st.data())
def test_mutated_plans(fuzz, data):
    seeds, leaves, watch, folder, words = fuzz
    doc = data.draw(mutated(seeds, leaves, words, "plan"), label="document")
    text = as_text(doc)
    check(doc if text is None or data.draw(st.booleans(), label="as a dict") else text, watch, folder)


@FUZZ
@given(data=st.data())
def test_truncated_plans(fuzz, data):
    seeds, _, watch, folder, _ = fuzz
    with pytest.raises(PlanError):
        check(data.draw(truncated(seeds), label="text"), watch, folder)
        raise PlanError("loaded")  # a cut document may still be valid JSON (a cut number): it must not load


@FUZZ
@given(data=st.data())
def test_deeply_nested_plans(fuzz, data):
    seeds, _, watch, folder, _ = fuzz
    text = data.draw(deeply_nested(seeds, data.draw(st.sampled_from(["plan", "input", "args", "columns"]))))
    with watch.check(), pytest.raises(PlanError):
        ei.Flow.from_json(text)


@pytest.mark.parametrize("text, words", [
    ('{"format": "eidos-plan", "version": 1, "plan": ' + "[" * 10_000 + "]" * 10_000 + "}", "nests deeper"),
    ("[" * 100_000, "nests deeper"),
    ('{"format": "eidos-plan", "version": 1e400, "plan": {}}', "version Infinity is not supported"),
    ('{"format": "eidos-plan", "version": NaN, "plan": {}}', "version NaN is not supported"),
    ('{"format": "eidos-plan", "version": true, "plan": {}}', "version true is not supported"),
    ('{"format": "eidos-plan", "version": 1, "plan": {"node": "Limit", "n": ' + "9" * 5000 + "}}", "malformed"),
    ('{"format": "eidos-plan", "version": 1, "plan": {}, "more": 1}', "unknown key 'more'"),
    ('{"format": "eidos-plan", "version": 1, "plan": {"node": "Filtre"}}', "did you mean 'Filter'"),
])
def test_hostile_documents(text, words):
    with pytest.raises(PlanError, match=words):
        ei.Flow.from_json(text)


def test_errors_name_the_place(fuzz):
    seeds = fuzz[0]
    doc = json.loads(json.dumps(seeds[0]))
    doc["plan"]["columns"][7][1]["args"][1] = {"lit": 2**10000, "dtype": "Int64"}
    with pytest.raises(PlanError, match=r"plan JSON at plan\.columns\[7\]\[1\]\.args\[1\]: literal .* out of range"):
        ei.Flow.from_json(doc)
    doc["plan"]["columns"][7][1]["args"][1] = {"lit": 1, "dtype": "Decimal(99, 2)"}
    with pytest.raises(PlanError, match=r"at plan\.columns\[7\]\[1\]\.args\[1\]\.dtype: decimal precision"):
        ei.Flow.from_json(doc)
    doc = json.loads(json.dumps(seeds[4]))
    doc["plan"]["n"] = -1
    with pytest.raises(PlanError, match=r"at plan\.n: expected an integer in 0\.\.9223372036854775807, got -1"):
        ei.Flow.from_json(doc)


def test_embedded_data_must_match_its_schema(fuzz):
    doc = json.loads(json.dumps(fuzz[0][4]))
    source = doc["plan"]["input"]["input"]["source"]
    source["schema"][0][1] = "String"
    with pytest.raises(PlanError, match=r"at plan\.input\.input\.source\.ipc: the data's columns"):
        ei.Flow.from_json(doc)
    source["ipc"] = "not base64!"
    with pytest.raises(PlanError, match="not base64 Arrow IPC data"):
        ei.Flow.from_json(doc)


def test_the_seeds_round_trip_and_run(fuzz):
    """The fuzzing starts from plans that load, explain and run: mutations test the loader, not the seeds."""
    seeds, _, _, folder, _ = fuzz
    for doc in seeds:
        flow = ei.Flow.from_json(doc)
        assert ei.Flow.from_json(flow.to_json()).plan == flow.plan
        flow.explain()
        if _runnable(flow.plan, folder):
            assert isinstance(flow.run(engine="reference"), pa.Table)


def _edited(flow: ei.Flow, **changes) -> dict:
    doc = json.loads(flow.to_json())
    doc["plan"].update(changes)
    return doc


@pytest.mark.parametrize("build, changes, words", [
    (lambda f: f.select("a"), {"columns": []}, r"Project \[\] has no columns"),
    (lambda f: f.agg(n=ei.count()), {"aggs": []}, "Aggregate has no columns"),
    (lambda f: f, {"columns": []}, "has no columns"),
    (lambda f: f.map_batches(batches_identity, schema={"a": ei.Int64}), {"schema": []}, "MapBatches .* has no columns"),
    (lambda f: f.sort("a"), {"keys": []}, "sort needs at least one column"),
    (lambda f: f.limit(1), {"n": 2**63 - 1, "offset": 2**63}, r"at plan\.offset: expected an integer in 0\.\."),
], ids=["select", "agg", "scan", "map_batches", "sort", "limit"])
def test_plans_the_flow_methods_cannot_build_are_refused(build, changes, words):
    """What select(), agg(), sort() and the sources refuse, a plan from JSON cannot ask for either: every step
    has a column (lanes could not agree on rows without columns) and a Sort a key."""
    with pytest.raises(PlanError, match=words):
        ei.Flow.from_json(_edited(build(ei.from_pydict({"a": [1, 2]})), **changes))


def test_a_source_without_columns_and_a_limit_past_int64_are_refused():
    with pytest.raises(PlanError, match="has no columns"):
        ei.from_arrow(pa.table({"a": [1, 2]}).select([]))
    with pytest.raises(PlanError, match="has no columns"):
        ei.from_pydict({})
    with pytest.raises(PlanError, match=r"up to 2\*\*63 - 1, got limit 18446744073709551616"):
        ei.from_pydict({"a": [1]}).limit(2**64)
    assert ei.from_pydict({"a": [1, 2]}).limit(2**63 - 1, 2**63 - 1).run(engine="reference").num_rows == 0
