"""The python lane's own contract: every way of running batches gives the reference lane's answer in
its row order; a function that raises names itself, the batch, the row and its arguments, chained
to its exception, and keeps nothing; a function that hangs is stopped by the timeout or Ctrl-C with
no worker left behind; functions reach worker processes only pickled from this process's own
objects, never by a name a plan carries; and batches travel through shared memory, never the pipe."""

from __future__ import annotations

import datetime as dt
import glob
import os
import pickle
import signal
import threading
from decimal import Decimal
from multiprocessing.connection import Connection

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col, when
from eidos.errors import ExecutionError, PlanError
from eidos.hal import trust
from eidos.lanes.python_native import pool, worker
from eidos.testing.compare import assert_tables_equal
from tests.lanes.python_native import udfs
from tests.lanes.python_native.conftest import worker_processes

MODES = {"processes": dict(mode="process", workers=2), "threads": dict(mode="thread", workers=2),
         "inline": dict(workers=1)}

TYPES = pa.table({
    "a": pa.array([3, None, 7, -1, 0, 12, 7, 5, None, 2], pa.int64()),
    "b": pa.array([1, 2, 0, 4, 0, 3, 1, None, 2, 5], pa.int32()),
    "d": pa.array([Decimal("1.50"), None, Decimal("-2.25"), Decimal("0.00"), Decimal("9.99"), Decimal("1.00"),
                   Decimal("3.10"), None, Decimal("7.77"), Decimal("0.01")], pa.decimal128(5, 2)),
    "t": pa.array([dt.date(2024, 2, 29), None, dt.date(1970, 1, 1)] * 3 + [dt.date(1, 1, 1)], pa.date32()),
    "s": pa.array(["a", "", None, "Zoë", "x@y.com", "😀", "b", None, "c", "d"], pa.large_string()),
})


def flow() -> ei.Flow:
    return ei.from_arrow(TYPES)


def udf(fn, dtype=ei.Int64):
    return ei.udf(fn, dtype)


def shm_left() -> list[str]:
    return glob.glob(f"/dev/shm/eidos-python-{os.getpid()}-*")


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_gives_the_reference_answer_in_order(mode, free):
    free(batch_rows=3, **MODES[mode])
    f = flow().with_columns(
        d2=udf(udfs.double)(col("a") + 1), dt=udf(udfs.text_of, ei.String)(col("d")),
        tt=udf(udfs.text_of, ei.String)(col("t")), st=udf(udfs.text_of, ei.String)(col("s")),
        q=when(col("b") != 0).then(udf(udfs.divide)(col("a"), col("b"))).otherwise(-1))
    assert_tables_equal(f.run(), f.run(engine="reference"), ordered=True)
    assert shm_left() == []


@pytest.mark.parametrize("mode", MODES)
def test_map_batches_in_every_mode(mode, free):
    free(batch_rows=4, **MODES[mode])
    f = flow().select("a").map_batches(udfs.plus_one_batches, schema={"a": ei.Int64})
    assert_tables_equal(f.run(), f.run(engine="reference"), ordered=True)
    empty = flow().filter(col("a") > 100).select("a").map_batches(udfs.plus_one_batches, schema={"a": ei.Int64})
    assert empty.run().num_rows == 0


def test_processes_run_batches_apart_from_this_process(free):
    free(mode="process", workers=2, batch_rows=1)
    pids = set(flow().select(p=udf(udfs.pid)(col("a"))).run().column("p").to_pylist())
    assert os.getpid() not in pids and len(pids) == 2


def test_threads_run_in_this_process(free):
    free(mode="thread", workers=2, batch_rows=1)
    assert set(flow().select(p=udf(udfs.pid)(col("a"))).run().column("p").to_pylist()) == {os.getpid()}


def test_the_mode_follows_the_gil(monkeypatch, free):
    free(workers=2, batch_rows=1)
    monkeypatch.setattr(pool, "gil_enabled", lambda: False)
    assert set(flow().select(p=udf(udfs.pid)(col("a"))).run().column("p").to_pylist()) == {os.getpid()}


def test_options_are_checked():
    from eidos.lanes.python_native import FreeLane

    for bad in (dict(mode="fork"), dict(workers=0), dict(batch_rows=1.5), dict(timeout=-1), dict(workers=True)):
        with pytest.raises(PlanError, match="the python lane's"):
            FreeLane(**bad)


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("mode", MODES)
def test_a_raise_names_the_function_batch_row_and_arguments(mode, free):
    free(batch_rows=3, **MODES[mode])
    f = flow().select(v=udf(udfs.fails_on_seven)(col("a")))
    with pytest.raises(ExecutionError) as got:
        f.run()
    with pytest.raises(ExecutionError) as ref:
        f.run(engine="reference")
    text = str(got.value)
    # the reference lane's words, then where: the first 7 is row 2 (batch 1: rows 0 to 2), not row 6
    assert text.startswith(str(ref.value).split(" (arguments")[0] + " (arguments (7,); ")
    assert text.endswith("row 2 of its input, in batch 1 of 4: rows 0 to 2)")
    cause = got.value.__cause__
    assert isinstance(cause, ValueError) and str(cause) == "seven is not allowed: 7"
    if mode == "processes":
        assert "fails_on_seven" in str(cause.__cause__)   # the worker's traceback, as text
    assert shm_left() == []


@pytest.mark.parametrize("mode", ["processes", "threads"])
def test_the_first_failing_row_wins_whatever_finishes_first(mode, free):
    free(batch_rows=2, **MODES[mode])
    data = ei.from_pydict({"a": [0, 7, 7, 1]})   # batch 2 fails at once, batch 1 after half a second
    with pytest.raises(ExecutionError, match=r"row 1 of its input, in batch 1 of 2: rows 0 to 1\)$"):
        data.select(v=udf(udfs.slow_then_fails)(col("a"))).run()


def test_the_first_function_in_column_order_wins(free):
    free(mode="process", workers=2, batch_rows=2)
    data = ei.from_pydict({"a": [7, 1, 1, 1], "b": [1, 1, 1, 7]})
    f = data.select(x=udf(udfs.double)(col("a")), y=udf(udfs.fails_on_seven)(col("b")),
                    z=udf(udfs.fails_on_seven)(col("a")))
    with pytest.raises(ExecutionError, match=r"arguments \(7,\); row 3 of its input"):
        f.run()


def test_a_wrong_return_type_names_the_value_and_row(free):
    free(mode="process", workers=2, batch_rows=4)
    with pytest.raises(ExecutionError, match=r"^udf tests\.lanes\.python_native\.udfs\.wrong_type returned str "
                       r"'not a number', which is not a Int64 \(declared return_dtype Int64\) \(arguments \(3,\); "
                       r"row 0 of its input, in batch 1 of 3: rows 0 to 3\)$"):
        flow().select(v=udf(udfs.wrong_type)(col("a"))).run()


def test_an_exception_that_does_not_pickle_comes_back_as_text(free):
    free(mode="process", workers=2, batch_rows=4)
    with pytest.raises(ExecutionError, match="raised Unpicklable: bad value 3") as got:
        flow().select(v=udf(udfs.raises_unpicklable)(col("a"))).run()
    assert isinstance(got.value.__cause__, RuntimeError) and "Unpicklable" in str(got.value.__cause__)


def test_long_and_odd_arguments_are_cut_and_escaped(free):
    free(mode="process", workers=2, batch_rows=1)
    odd = "\x1b[2J" + "x" * 500
    with pytest.raises(ExecutionError) as got:
        ei.from_pydict({"s": [odd]}).select(v=udf(udfs.wrong_type, ei.Int64)(col("s"))).run()
    text = str(got.value)
    assert "\x1b" not in text and "\\x1b[2J" in text and "x" * 200 not in text and "...,);" in text


@pytest.mark.parametrize("fn, words", [
    (udfs.raises_batches, r"map_batches function tests\.lanes\.python_native\.udfs\.raises_batches raised "
                          r"RuntimeError: batch of 4 rows refused \(batch 1 of 3: rows 0 to 3 of its input\)$"),
    (udfs.wrong_schema_batches, r"returned the wrong schema\n.*\n.*\(batch 1 of 3: rows 0 to 3 of its input\)$"),
])
def test_map_batches_errors_name_the_batch(fn, words, free):
    free(mode="process", workers=2, batch_rows=4)
    with pytest.raises(ExecutionError, match=words):
        flow().select("a").map_batches(fn, schema={"a": ei.Int64}).run()


def test_a_function_that_cannot_reach_a_worker_is_named(free):
    free(mode="process", workers=2, batch_rows=2)
    lock = threading.Lock()
    with pytest.raises(ExecutionError, match="cannot be sent to a worker process of the python lane"):
        flow().select(v=udf(lambda x: x if lock else None)(col("a"))).run()


def test_a_worker_that_dies_is_named(free):
    free(mode="process", workers=2, batch_rows=4)
    with pytest.raises(ExecutionError, match=r"^udf tests\.lanes\.python_native\.udfs\.exits: the worker process of "
                                             r"the python lane running it died \(exit code 3\) \(batch 1 of 3: "
                                             r"rows 0 to 3 of its input\)$"):
        flow().select(v=udf(udfs.exits)(col("a"))).run()
    assert worker_processes() == set(pool.pids())


# ---------------------------------------------------------------- stopping

def test_a_timeout_stops_the_worker_processes(free):
    free(mode="process", workers=2, batch_rows=2, timeout=1)
    with pytest.raises(ExecutionError, match=r"udf tests\.lanes\.python_native\.udfs\.spins did not finish within "
                                             r"the python lane's timeout of 1 s \(batch 1 of 5 was still running\)"):
        flow().select(v=udf(udfs.spins)(col("a"))).run()
    assert worker_processes() == set(pool.pids())   # only the idle ones: the two spinning were killed and reaped
    assert shm_left() == []


def test_ctrl_c_stops_the_worker_processes(free):
    free(mode="process", workers=2, batch_rows=2)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            flow().select(v=udf(udfs.sleeps)(col("a"))).run()
    finally:
        timer.cancel()
    assert worker_processes() == set(pool.pids())
    assert shm_left() == []


def test_a_timeout_stops_threads_running_python(free):
    free(mode="thread", workers=2, batch_rows=2, timeout=1)
    with pytest.raises(ExecutionError, match=r"spins did not finish within the python lane's timeout of 1 s "
                                             r"\(batch 1 of 5 was still running\); its workers were stopped$"):
        flow().select(v=udf(udfs.spins)(col("a"))).run()
    assert not [t for t in threading.enumerate() if t.name.startswith("eidos-python-")]


def test_workers_left_from_a_timeout_are_replaced(free):
    free(mode="process", workers=2, batch_rows=2, timeout=1)
    with pytest.raises(ExecutionError):
        flow().select(v=udf(udfs.spins)(col("a"))).run()
    free(mode="process", workers=2, batch_rows=2)   # no timeout: starting the new workers may take a second
    f = flow().select(v=udf(udfs.double)(col("a")))
    assert_tables_equal(f.run(), f.run(engine="reference"), ordered=True)


# ---------------------------------------------------------------- trust and transport

def test_a_plan_from_json_reaches_only_registered_functions(free):
    free(mode="process", workers=2, batch_rows=2)
    text = flow().select(v=udf(udfs.double)(col("a"))).to_json()
    assert "tests.python_native:double" in text
    assert_tables_equal(ei.Flow.from_json(text).run(), flow().select(v=udf(udfs.double)(col("a"))).run(),
                        ordered=True)
    unregistered = text.replace("tests.python_native:double", "tests.lanes.python_native.udfs:spins")
    with pytest.raises(PlanError, match="which this process has not allowed"):
        ei.Flow.from_json(unregistered)


def test_workers_get_the_resolved_function_never_the_plans_name(monkeypatch, free):
    free(mode="process", workers=2, batch_rows=2)
    name = "no_such_module_anywhere.udfs:triple"
    ei.register_udf(lambda x: None if x is None else 3 * x, name)
    try:
        text = flow().select(v=ei.udf(trust.registered(name), ei.Int64)(col("a"))).to_json()
        sent = []
        real = pool.Process.send
        monkeypatch.setattr(pool.Process, "send", lambda self, message: sent.append(message) or real(self, message))
        got = ei.Flow.from_json(text).run()
    finally:
        trust.unregister_udf(name)
    assert got.column("v").to_pylist() == [None if a is None else 3 * a for a in TYPES.column("a").to_pylist()]
    blobs = [m[3] for m in sent if m[3] is not None]
    assert blobs and all(b"no_such_module_anywhere" not in blob for blob in blobs)


def test_batches_never_travel_through_the_pipe(monkeypatch, free):
    free(mode="process", workers=2, batch_rows=50_000)
    data = ei.from_pydict({"a": list(range(200_000)), "s": ["some text"] * 200_000})
    moved = []
    real_send, real_recv = pool.Process.send, Connection.recv_bytes

    def send(self, message):
        assert all(isinstance(v, (int, str, bytes, list, type(None))) for v in message)
        moved.append(len(pickle.dumps(message)))
        return real_send(self, message)

    def recv_bytes(self, *a):
        data = real_recv(self, *a)
        moved.append(len(data))
        return data

    monkeypatch.setattr(pool.Process, "send", send)
    monkeypatch.setattr(Connection, "recv_bytes", recv_bytes)
    got = data.select(v=udf(udfs.double)(col("a")), s=udf(udfs.text_of, ei.String)(col("s"))).run()
    assert got.column("v").to_pylist()[-1] == 2 * 199_999
    assert len(moved) == 16 and sum(moved) < 20_000   # 8 tasks each way; the columns are about 4 MB


def test_a_worker_maps_its_batches_without_copying(tmp_path):
    path = str(tmp_path / "input.arrow")
    table = pa.table({"a": list(range(100_000))})
    with pa.ipc.new_file(path, table.schema) as w:
        w.write_table(table, max_chunksize=50_000)
    before = pa.total_allocated_bytes()
    read = worker.read(path)
    assert read.num_rows == 100_000 and pa.total_allocated_bytes() == before
    assert read.column("a")[50_000].as_py() == 50_000
