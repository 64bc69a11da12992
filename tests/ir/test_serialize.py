"""The JSON form: refusals and errors (the round-trip property lives with the generated plans)."""

from __future__ import annotations

import json

import pytest

import eidos as ei
from eidos import col
from eidos.errors import PlanError


@ei.register_udf
def double(x):
    return None if x is None else 2 * x


@ei.register_udf
def keep(batch):
    return batch


def base():
    return ei.from_pydict({"a": [1, 2]})


def test_module_level_functions_round_trip():
    f = base().with_columns(b=ei.udf(double, ei.Int64)(col("a"))).map_batches(keep, schema={"a": ei.Int64, "b": ei.Int64})
    g = ei.Flow.from_json(f.to_json())
    assert g.plan == f.plan


def test_lambda_is_refused_with_the_reason():
    f = base().with_columns(b=ei.udf(lambda x: x, ei.Int64)(col("a")))
    with pytest.raises(PlanError, match="has no importable name"):
        f.to_json()


def test_nested_function_is_refused():
    def inner(batch):
        return batch

    with pytest.raises(PlanError, match="has no importable name"):
        base().map_batches(inner, schema={"a": ei.Int64}).to_json()


def test_versioned_and_validated():
    doc = json.loads(base().to_json())
    assert doc["format"] == "eidos-plan" and doc["version"] == 1
    doc["version"] = 99
    with pytest.raises(PlanError, match="version 99 is not supported"):
        ei.Flow.from_json(json.dumps(doc))
    with pytest.raises(PlanError, match="not an eidos plan"):
        ei.Flow.from_json("[]")
    with pytest.raises(PlanError, match="malformed"):
        ei.Flow.from_json("{")


def test_unknown_function_reference_is_a_clear_error():
    doc = json.loads(base().with_columns(b=ei.udf(double, ei.Int64)(col("a"))).to_json())
    text = json.dumps(doc).replace("test_serialize:double", "test_serialize:nope")
    with pytest.raises(PlanError, match="test_serialize:nope', which this process has not allowed"):
        ei.Flow.from_json(text)
    with pytest.raises(PlanError, match="which its module does not define"):
        ei.Flow.from_json(text, trusted_modules=("tests.ir",))


def test_json_of_a_bad_plan_fails_validation():
    doc = json.loads(base().filter(col("a") > 1).to_json())
    doc["plan"]["predicate"]["args"][0]["col"] = "zz"
    with pytest.raises(PlanError, match="column 'zz' does not exist"):
        ei.Flow.from_json(json.dumps(doc))


def test_an_aggregations_options_round_trip_and_are_checked():
    flow = base().agg(q=col("a").quantile(0.25, "linear"))
    assert ei.Flow.from_json(flow.to_json()).plan == flow.plan
    doc = json.loads(flow.to_json())
    for options, message in [([2.0, "linear"], "a float from 0 to 1 as its fraction parameter, got 2.0"),
                             ([0.5, "cubic"], "one of nearest, higher, lower, midpoint, linear"),
                             ([0.5], r"quantile takes 2 constant parameter\(s\)")]:
        doc["plan"]["aggs"][0][1]["options"] = options
        with pytest.raises(PlanError, match=message):
            ei.Flow.from_json(json.dumps(doc))
