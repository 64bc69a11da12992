"""Running stages on Ray: blocks read in place from the object store, results streamed one object at a
time (the first batch before the last task ends), Ctrl-C cancelling the tasks still running."""

from __future__ import annotations

import _thread
import functools
import os
import signal
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

import eidos as ei
from eidos import col
from eidos.ir import nodes as N
from eidos.testing.compare import assert_tables_equal
from tests.processes import alive

ray = pytest.importorskip("ray")


def _mapping(address: int) -> str:
    """The /proc/self/maps line of the mapping holding `address` ('' when none does)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= address < hi:
                return line.strip()
    return ""


def _where_blocks_are_read(plan: N.Node, *blocks: pa.Table) -> tuple[str, str]:
    """In a worker: the mapping of the first buffer a task's Input leaf reads (as execute binds it), and,
    for contrast, of a table the worker made itself."""
    from eidos.lanes.ray import execute
    from eidos.lanes.ray.stages import FORWARD, Exchange

    bound = execute._bind(execute.Work(plan, (len(blocks),), Exchange(FORWARD)), blocks)
    table = next(n for n in bound.walk() if isinstance(n, N.Scan)).source.table
    own = pa.table({"v": np.arange(100_000)})
    return (_mapping(table.column(0).chunks[0].buffers()[1].address),
            _mapping(own.column(0).chunks[0].buffers()[1].address))


def test_a_worker_reads_a_block_in_the_object_stores_memory(ray_cluster):
    from eidos.lanes.ray.stages import Input

    block = pa.table({"v": np.arange(1_000_000)})   # 8 MB: too big to be inlined in the task's message
    plan = N.Scan(Input(ei.from_arrow(block).schema, 0))
    read, own = ray.get(ray.remote(_where_blocks_are_read).remote(plan, ray.put(block)))
    assert "/dev/shm" in read or "plasma" in read, read
    assert "/dev/shm" not in own and "plasma" not in own, own


def _gated(gate: str, v: int) -> int:
    """Waits for the file `gate` (at most 60 s), then gives v."""
    for _ in range(600):
        if os.path.exists(gate):
            return v
        time.sleep(0.1)
    raise TimeoutError(f"{gate} never came: the driver did not stream the first block before this task ended")


def test_the_first_batch_arrives_before_the_last_task_ends(tmp_path, ray_cluster):
    """The last partition's task waits until the test has the first batch: the stream gives it while that
    task runs, fetching one object at a time."""
    from eidos.lanes.ray import execute

    gate = tmp_path / "gate"
    fetched = []
    real = execute._get
    first = ei.from_arrow(pa.table({"v": pa.array([1, 2, 3, 4], pa.int64())}))
    last = ei.from_arrow(pa.table({"v": pa.array([5], pa.int64())}))
    flow = first.union(last.select(v=ei.udf(functools.partial(_gated, str(gate)), ei.Int64)(col("v"))))
    execute._get = lambda ref: fetched.append(ref) or real(ref)
    try:
        batches = flow.stream(engine="ray")
        got = [next(batches)]
        assert len(fetched) == 1 and isinstance(fetched[0], ray.ObjectRef)
        gate.touch()
        got += list(batches)
    finally:
        execute._get = real
        gate.touch()
    assert len(fetched) == 3   # the blocks of two slices of `first` and the one of `last`, each fetched alone
    assert_tables_equal(pa.Table.from_batches(got), flow.run(engine="reference"), ordered=True)


def _sleeper(marks: str, v: int) -> int:
    with open(os.path.join(marks, str(os.getpid())), "w"):
        pass
    time.sleep(120)
    return v


@pytest.fixture
def ctrl_c():
    """Python's own SIGINT handler for the test: a process started in the background by a shell without job
    control inherits SIGINT ignored, and then neither Ctrl-C nor interrupt_main raises anything."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_cancels_the_running_tasks(tmp_path, ray_cluster, ctrl_c):
    flow = ei.from_arrow(pa.table({"v": pa.array([1, 2], pa.int64())})).select(
        v=ei.udf(functools.partial(_sleeper, str(tmp_path)), ei.Int64)(col("v")))

    def interrupt_when_a_task_runs():
        for _ in range(600):
            if os.listdir(tmp_path):
                _thread.interrupt_main()
                return
            time.sleep(0.1)

    threading.Thread(target=interrupt_when_a_task_runs, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        flow.run(engine="ray")
    workers = [int(name) for name in os.listdir(tmp_path)]
    for _ in range(300):   # a cancelled task's worker is killed (ray.cancel(force=True))
        if not any(alive(pid) for pid in workers):
            break
        time.sleep(0.1)
    assert not any(alive(pid) for pid in workers), f"workers {workers} still run their tasks"

