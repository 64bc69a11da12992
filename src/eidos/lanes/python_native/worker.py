"""A worker process of the python lane: it runs batches of Python steps the driver hands it.

The driver starts it as `python -c` with one end of a socket pair (pool.py) and sends it, per
batch, a small message: the step (a `calls.Call`, pickled by the driver from the function object
it already holds, sent once per run), the Arrow IPC file in shared memory that holds the input, the
record batches of it to read, and the file to write the result to. The worker maps the input file
and reads those batches without copying them, and answers with the batch's number and, when the
function failed, what `calls.Failed` says: no batch ever travels through the pipe.

It never imports a name a plan carries: a function reaches it only as the driver pickled it. It
ignores SIGINT (the driver decides what Ctrl-C stops) and exits when the driver goes away.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
import traceback
from multiprocessing.connection import Connection

import pyarrow as pa

from eidos.lanes.python_native.calls import Failed


def main(fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch, args=(os.getppid(),), daemon=True).start()
    conn = Connection(fd)
    calls: dict[bytes, object] = {}
    run = None
    while True:
        try:
            message = pickle.loads(conn.recv_bytes())
        except EOFError:
            return
        task, this_run, digest, blob, path, out = message
        if this_run != run:   # a new run: forget the last run's functions
            run, calls = this_run, {}
        try:
            if blob is not None:
                calls[digest] = pickle.loads(blob)
            table = read(path)
            write(out, calls[digest].run(table))
            reply = (task, None)
        except Failed as e:
            reply = (task, failure(e.text, e.row, e.arguments, e.__cause__))
        except Exception as e:  # noqa: BLE001 - the worker's own failure (a function that does not unpickle, ...)
            reply = (task, failure(f"the python lane's worker process failed: {type(e).__name__}: {e}", cause=e))
        conn.send_bytes(pickle.dumps(reply))


def read(path: str) -> pa.Table:
    """The Arrow IPC file at `path`, memory-mapped: no copy."""
    return pa.ipc.open_file(pa.memory_map(path)).read_all()


def write(path: str, table: pa.Table) -> None:
    with pa.ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)


def failure(text: str, row: int | None = None, arguments: str | None = None,
            cause: BaseException | None = None) -> tuple:
    """What the driver needs to raise the error: the message, row and arguments, and the function's
    exception (pickled when it pickles, else its type and text) with its traceback as text."""
    if cause is None:
        return (text, row, arguments, None, None)
    try:
        blob = pickle.dumps(cause)
    except Exception:  # noqa: BLE001 - an exception that does not pickle travels as its type and text
        blob = None
    shown = f"{type(cause).__name__}: {cause}"
    return (text, row, arguments, (blob, shown), "".join(traceback.format_exception(cause)))


def _watch(parent: int) -> None:
    """Exit when the driver is gone (killed without closing the pipe): no orphan keeps running."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)
