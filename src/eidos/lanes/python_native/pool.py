"""The workers that run a Python step's batches, and the loop that hands the batches out.

Three kinds, one interface (`start` a task, `wait` for finished ones, `stop` the running ones):

- `Inline`: the calling thread, one batch after another (one worker, or a single batch);
- `Threads`: threads of this process, where the GIL is disabled (free-threaded CPython), or when
  asked for; a thread stuck in Python code is stopped by raising in it (PyThreadState_SetAsyncExc),
  one stuck in C code cannot be and is left behind, said so;
- `Processes`: worker processes (worker.py), kept between runs. Each batch's input is an Arrow IPC
  file in shared memory (/dev/shm), written when the batch is handed out, that the worker maps
  without copying, and its result a file the worker writes there and the driver maps; the pipe
  carries only small messages.
  Stopping kills the processes and reaps them.

`schedule` hands tasks out in order and, when one fails, stops handing out, waits for the tasks
before it (one of them may fail at an earlier row) and stops the rest: the error is the first
failing task's, as the reference lane, calling row after row, meets it.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing import Pipe
from multiprocessing.connection import wait as wait_for

import pyarrow as pa

from eidos.errors import ExecutionError
from eidos.lanes.python_native.calls import Failed
from eidos.lanes.python_native.worker import read as read_mapped

# How long a wait blocks at most before looking at the deadline again (Ctrl-C arrives at once).
TICK_S = 0.2


def gil_enabled() -> bool:
    """Whether this CPython runs with the GIL (always, before 3.13; `sys._is_gil_enabled()` after)."""
    enabled = getattr(sys, "_is_gil_enabled", None)
    return True if enabled is None else bool(enabled())


class TimedOut(Exception):
    """The deadline passed with `task` still running."""

    def __init__(self, task: int):
        super().__init__(task)
        self.task = task


def schedule(tasks: list, workers, deadline: float | None) -> list:
    """The outcome of each task, in order; the first failing task's `Failed` is raised instead (with
    its `index`), `TimedOut` at `deadline` (time.monotonic()). Tasks still running when it returns or
    raises (KeyboardInterrupt included) are stopped: `workers.stop()` ends the step's use of them."""
    done: dict[int, object] = {}
    failed: dict[int, Failed] = {}
    running: set[int] = set()
    following = 0
    try:
        while True:
            while following < len(tasks) and not failed and len(running) < workers.size:
                workers.start(following, tasks[following])
                running.add(following)
                following += 1
            if not running or (failed and min(running) > min(failed)):
                break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimedOut(min(running))
            for task, outcome in workers.wait(TICK_S if left is None else min(left, TICK_S)):
                running.discard(task)
                if isinstance(outcome, Failed):
                    outcome.index = task
                    failed[task] = outcome
                else:
                    done[task] = outcome
        if failed:
            raise failed[min(failed)]
        return [done[i] for i in range(len(tasks))]
    finally:
        workers.stop()


class Inline:
    """The calling thread: each task runs when started."""

    size = 1

    def __init__(self, run: Callable[[object], object]):
        self.run, self.finished = run, []

    def start(self, index: int, task: object) -> None:
        try:
            self.finished.append((index, self.run(task)))
        except Failed as e:
            self.finished.append((index, e))

    def wait(self, timeout: float) -> list:
        finished, self.finished = self.finished, []
        return finished

    def stop(self) -> None:
        pass


class _Stop(BaseException):
    """Raised in a worker thread to stop the function it runs."""


class Threads:
    """`size` threads of this process, for this step only."""

    def __init__(self, size: int, run: Callable[[object], object]):
        self.size, self.run = size, run
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.running: dict[int, int] = {}   # thread ident -> task
        self.stuck: list[str] = []           # threads that did not stop (in C code)
        self.threads = [threading.Thread(target=self._loop, daemon=True, name=f"eidos-python-{i}")
                        for i in range(size)]
        for t in self.threads:
            t.start()

    def _loop(self) -> None:
        me = threading.get_ident()
        try:
            while (item := self.inbox.get()) is not None:
                index, task = item
                self.running[me] = index
                try:
                    outcome = self.run(task)
                except Failed as e:
                    outcome = e
                finally:
                    self.running.pop(me, None)
                self.outbox.put((index, outcome))
        except _Stop:   # stopped (it may arrive just after its task ended): the thread ends
            return

    def start(self, index: int, task: object) -> None:
        self.inbox.put((index, task))

    def wait(self, timeout: float) -> list:
        try:
            finished = [self.outbox.get(timeout=timeout)]
        except queue.Empty:
            return []
        while not self.outbox.empty():
            finished.append(self.outbox.get())
        return finished

    def stop(self) -> None:
        """Stop the threads still running a task (by an exception raised in them) and end them all."""
        for ident in list(self.running):
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(_Stop))
        for _ in self.threads:
            self.inbox.put(None)
        for t in self.threads:
            t.join(timeout=1.0)
        self.stuck = [t.name for t in self.threads if t.is_alive()]


class Process:
    """One worker process (worker.py) and our end of its socket pair."""

    def __init__(self) -> None:
        ours, theirs = Pipe()
        code = "import sys; from eidos.lanes.python_native.worker import main; main(int(sys.argv[1]))"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        # its own session: a Ctrl-C at the terminal reaches the driver only, which stops the workers
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno())], env=env,
                                     pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        self.conn, self.run, self.sent = ours, None, set()

    def send(self, message: tuple) -> None:
        self.conn.send_bytes(pickle.dumps(message))

    def kill(self) -> None:
        self.conn.close()
        self.proc.kill()
        self.proc.wait()


_idle: list[Process] = []
_idle_lock = threading.Lock()


def pids() -> list[int]:
    """The worker processes waiting for work (tests look for orphans by them)."""
    with _idle_lock:
        return [w.proc.pid for w in _idle]


@atexit.register
def _close_idle() -> None:
    with _idle_lock:
        idle, _idle[:] = list(_idle), []
    for w in idle:
        w.conn.close()   # the worker reads EOF and exits
    for w in idle:
        try:
            w.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            w.kill()


class Processes:
    """`size` worker processes for one step, taken from those kept between runs (started when
    missing). A task is (call, input, out): the `calls.Call` to run, a function giving the path of the
    batch's input file (written when first asked for), the file it writes; `run` (a number) tells one step's calls
    apart from another's, so that a worker keeps only the current step's."""

    def __init__(self, size: int, run: int):
        self.size, self.run = size, run
        with _idle_lock:
            self.free = [w for w in _idle[:size] if w.proc.poll() is None]
            del _idle[:size]
        self.busy: dict[object, tuple[Process, int, tuple]] = {}   # connection -> (worker, task index, task)
        self.blobs: dict[int, tuple[bytes, bytes]] = {}          # id(call) -> (digest, pickled call)

    def start(self, index: int, task: tuple) -> None:
        call, source, out = task
        if id(call) not in self.blobs:
            blob = _pickled(call)
            self.blobs[id(call)] = (hashlib.blake2b(blob, digest_size=16).digest(), blob)
        digest, blob = self.blobs[id(call)]
        worker = self.free.pop() if self.free else Process()
        self.busy[worker.conn] = (worker, index, task)   # before sending: stop() finds it whatever happens next
        if worker.run != self.run:
            worker.run, worker.sent = self.run, set()
        worker.send((index, self.run, digest, None if digest in worker.sent else blob, source(), out))
        worker.sent.add(digest)

    def wait(self, timeout: float) -> list:
        finished = []
        for conn in wait_for(list(self.busy), timeout):
            worker, index, (call, _, out) = self.busy.pop(conn)
            try:
                _, failure = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError):
                code = worker.proc.wait()
                finished.append((index, Failed(f"{call.what}: the worker process of the python lane running it "
                                               f"died (exit code {code})")))
                continue
            self.free.append(worker)
            finished.append((index, _read(out) if failure is None else _failed(*failure)))
        return finished

    def stop(self) -> None:
        """Kill the workers still running a task (and reap them); keep the idle ones for the next run."""
        for worker, _, _ in self.busy.values():
            worker.kill()
        self.busy.clear()
        with _idle_lock:
            _idle.extend(self.free)
        self.free = []


def _pickled(call) -> bytes:
    """The call as the worker gets it: the function object this process already holds, pickled by
    cloudpickle (by reference when its module imports, by value for a lambda or a closure)."""
    import cloudpickle

    try:
        return cloudpickle.dumps(call)
    except Exception as e:  # noqa: BLE001 - whatever the function holds that does not pickle
        raise ExecutionError(f"{call.what} cannot be sent to a worker process of the python lane: "
                             f"{type(e).__name__}: {e}; define it at module level, or give the lane "
                             "mode='thread' or workers=1") from e


def _read(path: str) -> pa.Table:
    """A result file, memory-mapped (no copy), unlinked at once: the mapping keeps it while used."""
    table = read_mapped(path)
    os.unlink(path)
    return table


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process, as text."""

    def __str__(self) -> str:
        return self.args[0]


def _failed(text: str, row: int | None, arguments: str | None, cause: tuple | None, trace: str | None) -> Failed:
    failed = Failed(text, row, arguments)
    if cause is not None:
        blob, shown = cause
        try:
            original = pickle.loads(blob) if blob is not None else None
        except Exception:  # noqa: BLE001 - an exception class this process cannot rebuild
            original = None
        if not isinstance(original, BaseException):
            original = RuntimeError(shown)
        original.__cause__ = RemoteTraceback(trace)
        failed.__cause__ = original
    return failed
