"""Names from plans, files and data never drive the terminal: messages, explain() and the command's output.

A column, key or partition name may hold anything (a terminal escape, a newline, a bidirectional
control). Error messages quote names with repr; explain() and the command's tables show a name as written
when every character is printable, else as its repr (errors.shown); and whatever an EidosError's text
holds (an engine's message too), printing it shows each control character other than a newline or a tab
as its escape.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col
from eidos.cli import main
from eidos.errors import EidosError, ExecutionError, PlanError, shown

EVIL = "\x1b[2J\x1b]0;owned\x07x\ny\u202e"


def clean(text: str) -> bool:
    """No character a terminal would act on, but newlines and tabs."""
    return all(c.isprintable() or c in "\n\t" for c in text)


def message(fn) -> str:
    with pytest.raises(EidosError) as info:
        fn()
    text = str(info.value)
    assert clean(text), text
    return text


@pytest.fixture
def flow():
    return ei.from_pydict({EVIL: [1, 2], "ok": [3, 4]})


def test_the_columns_a_missing_column_error_lists_are_quoted(flow):
    text = message(lambda: flow.select("nope"))
    assert f"columns: {EVIL!r}, 'ok'" in text
    text = message(lambda: flow.select(EVIL[:-1]))
    assert f"did you mean {EVIL!r}?" in text


def test_explain_and_labels_show_unprintable_names_as_their_repr(flow):
    q = flow.filter(col(EVIL) > 1).select(col(EVIL).alias(EVIL + "2"), "ok").sort(EVIL + "2")
    text = q.explain()
    assert clean(text) and repr(EVIL) in text
    assert "ok" in text and "'ok'" not in text   # a printable name stays as written
    assert clean(repr(q.schema)) and repr(EVIL + "2") in repr(q.schema)
    joined = flow.join(flow.rename({EVIL: "k"}), left_on=EVIL, right_on="k")
    assert clean(joined.explain())
    message(lambda: flow.filter(col(EVIL)))   # 'filter predicate must be Boolean, got Int64: <the predicate>'


def test_union_and_map_batches_schemas(flow):
    message(lambda: flow.union(ei.from_pydict({"ok": [1], EVIL: [2]})))

    def rename(batch):
        return pa.RecordBatch.from_pydict({EVIL + "!": batch.column(0), "ok": batch.column(1)})

    bad = flow.map_batches(rename, schema={EVIL: ei.Int64, "ok": ei.Int64})
    assert repr(EVIL + "!") in message(lambda: bad.run(engine="reference"))


def test_files_names(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n")
    flow = ei.read_csv(path)
    header = EVIL.replace("\n", "")   # a CSV header is one line
    path.write_text(f"a,{header}\n1,2\n")
    assert repr(header) in message(lambda: flow.run(engine="reference"))
    for key in ("k", EVIL):
        os.makedirs(tmp_path / "d" / f"{key}=1")
        pq.write_table(pa.table({"x": [1]}), tmp_path / "d" / f"{key}=1" / "0.parquet")
    message(lambda: ei.read_parquet(tmp_path / "d"))   # partitioned differently: the keys are named
    pq.write_table(pa.table({EVIL: [1]}), tmp_path / "p.parquet")
    assert clean(ei.read_parquet(tmp_path / "p.parquet").explain())


def test_every_eidos_error_escapes_control_characters():
    err = ExecutionError(f"the engine said: column {EVIL} not found\n\tsecond line")
    assert str(err) == ("the engine said: column \\x1b[2J\\x1b]0;owned\\x07x\ny\\u202e not found\n\tsecond line")
    assert err.args[0].startswith("the engine said")    # the original text is kept for code that needs it
    assert shown("plain name é 列") == "plain name é 列" and shown("a\tb") == "'a\\tb'"


def test_the_command_shows_names_and_values_escaped(tmp_path, capsys):
    flow = ei.from_pydict({EVIL: [f"v{EVIL}"], "ok": ["fine"]})
    plan = tmp_path / "plan.json"
    plan.write_text(flow.to_json())
    assert main(["run", str(plan)]) == 0
    out = capsys.readouterr().out
    assert clean(out.replace("\n", "")) and repr(EVIL) in out and "fine" in out
    assert main(["explain", str(plan)]) == 0
    assert clean(capsys.readouterr().out)
    doc = json.loads(flow.select("ok").to_json())
    doc["plan"]["columns"][0] = ["ok", {"col": EVIL + "?"}]
    plan.write_text(json.dumps(doc))
    assert main(["run", str(plan)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and clean(err) and repr(EVIL + "?") in err


names = st.text(st.characters(codec="utf-8", categories=["Cc", "Cf", "Zl", "Zp", "L", "N"]), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(a=names, b=names)
def test_generated_names_never_reach_a_message_unescaped(a, b):
    if a == b:
        return
    flow = ei.from_pydict({a: [1, 2], b: ["x", None]})
    assert clean(flow.filter(col(a) > 1).group_by(b).agg(n=col(a).sum()).sort(b).explain())
    message(lambda: flow.select(a + b))
    message(lambda: flow.filter(col(b)))
    with pytest.raises(PlanError):
        flow.rename({a: b})
