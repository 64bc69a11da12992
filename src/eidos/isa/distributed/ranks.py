"""Ranks: one worker per device, each holding a kernel target joined to the group, run from one driver.

`Ranks` spawns one process per rank on this host (gloo between CPU processes, NCCL between GPUs, one GPU
each: its current device, its 'gpu'); `Simulated` runs the ranks as threads of this process over
the reference's group; eidos.isa.distributed.ray puts them on Ray actors. All three answer run(fn, *args):
fn(rank, *args) on every rank at once, results in rank order. A rank is a `Rank`: its index, the group,
its target, its device and a store of what stays on the device between calls (shards).
"""

from __future__ import annotations

import datetime
import os
import shutil
import tempfile
import threading
import time
import traceback
import weakref
from dataclasses import dataclass, field

from eidos.errors import BackendError, ExecutionError

from . import group as G

TIMEOUT_S = 300.0   # a collective some rank never reaches fails after this, rather than hanging
SPIN_S = 0.005      # how long an NCCL rank (and the driver) polls its pipe before sleeping on it


@dataclass
class Rank:
    """One rank as a function run on it sees it."""

    rank: int
    size: int
    group: G.Group
    target: object            # the kernel target (eidos.isa) its programs run on, joined to group
    device: str               # where its tensors live in its process: 'cpu' or 'gpu'
    store: dict = field(default_factory=dict)   # key -> what stays on the rank between calls

    @property
    def name(self) -> str:
        """The device as the driver names it: 'gpu:1', 'cpu:0'."""
        return f"{self.device}:{self.rank}"


def _dumps(obj) -> bytes:
    """obj as bytes for the other side: plain pickle (a quarter of cloudpickle's time per message) where
    it can name everything by reference outside __main__; else cloudpickle, which sends lambdas, local
    functions and the driver script's functions by value."""
    import pickle

    try:
        out = pickle.dumps(obj, protocol=5)
        if b"__main__" not in out:
            return out
    except (pickle.PicklingError, AttributeError, TypeError):
        pass
    try:
        import cloudpickle
    except ImportError:   # functions then travel by reference (module-level ones only)
        return pickle.dumps(obj, protocol=5)
    return cloudpickle.dumps(obj, protocol=5)


def _wait(conn, spin_s: float) -> None:
    """Poll conn for up to spin_s before the caller blocks on it: a process woken by a pipe starts tens
    of microseconds late, a polling one at once. By default only NCCL ranks poll (GPU hosts have cores
    to spare); gloo ranks on a small CPU host would take the cores the others work on."""
    if spin_s:
        end = time.perf_counter() + spin_s
        while not conn.poll(0) and time.perf_counter() < end:
            pass


def _call(rank: Rank, fn, args):
    try:
        return True, fn(rank, *args)
    except BaseException as e:  # noqa: BLE001 - sent to the driver with its traceback
        return False, f"rank {rank.rank}: {type(e).__name__}: {e}\n{traceback.format_exc()}"


def _raise(results: list) -> list:
    failed = [r for ok, r in results if not ok]
    if failed:
        raise ExecutionError("a function run on the ranks failed:\n" + "\n".join(failed))
    return [r for _, r in results]


def _each(size: int, args: tuple, each) -> list[tuple]:
    if each is None:
        return [args] * size
    if len(each) != size:
        raise BackendError(f"run: each= has {len(each)} argument tuples for {size} ranks")
    return [tuple(args) + tuple(e) for e in each]


# ---- the ranks as threads of this process, over the reference's group -------------------------

class Simulated:
    """`size` ranks in this process (threads), each with its own target (`target`, default the reference
    interpreter) over the reference's simulated group: the definition the other ranks are tested against."""

    def __init__(self, size: int, target: str = "reference") -> None:
        from .. import registry

        self.size, self.kind = int(size), "simulated"
        self.ranks = []
        for g in G.Simulated.of(self.size, TIMEOUT_S):
            t = registry.create(target)
            t.join(g)
            self.ranks.append(Rank(g.rank, self.size, g, t, "cpu"))

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.ranks)

    def run(self, fn, *args, each=None) -> list:
        jobs = _each(self.size, args, each)
        results: list = [None] * self.size

        def one(r: Rank):
            results[r.rank] = _call(r, fn, jobs[r.rank])
            if not results[r.rank][0]:
                r.group.abort()

        threads = [threading.Thread(target=one, args=(r,)) for r in self.ranks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if any(not ok for ok, _ in results):   # a failed rank broke the group: make a fresh one
            self.__init__(self.size, self.ranks[0].target.name)
        return _raise(results)

    def close(self) -> None:
        self.ranks = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- one process per rank ----------------------------------------------------------------------

def setup(rank: int, size: int, backend: str, init_method: str, target: str | None, gpu: int = 0) -> Rank:
    """Join the torch.distributed group as `rank` and make the rank's target (in the rank's process); with
    NCCL the rank's GPU (`gpu`, an index among the visible ones) becomes the process's current device, so
    its target, its tensors and NCCL use it (every GPU stays visible: NCCL's direct paths between GPUs
    need the peer visible)."""
    import torch.distributed as dist

    from .. import registry
    from .process_group import TorchGroup

    if backend == "nccl":
        import torch

        torch.cuda.set_device(gpu)

    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    g = TorchGroup()
    device = "gpu" if backend == "nccl" else "cpu"
    t = registry.create(target or ("triton" if device == "gpu" else "reference"))
    t.join(g)
    return Rank(rank, size, g, t, device)


def _serve(rank: int, size: int, backend: str, init_method: str, target, conn, spin: float) -> None:
    """A rank's process: set up, then run what the driver sends until it sends None."""
    try:
        r = setup(rank, size, backend, init_method, target, gpu=rank)
    except BaseException as e:  # noqa: BLE001 - reported to the driver
        conn.send_bytes(_dumps((False, f"rank {rank}: set-up failed: {type(e).__name__}: {e}")))
        return
    conn.send_bytes(_dumps((True, None)))
    import pickle

    try:
        while True:
            _wait(conn, spin)
            msg = conn.recv_bytes()
            job = pickle.loads(msg)
            if job is None:
                break
            conn.send_bytes(_dumps(_call(r, *job)))
    except EOFError:
        pass
    finally:
        import torch.distributed as dist

        r.store.clear()
        if dist.is_initialized():
            dist.destroy_process_group()


class Ranks:
    """`size` processes on this host, one per rank, joined by torch.distributed ('gloo' or 'nccl'; 'nccl'
    gives rank r the r-th visible GPU as its current device). `target` names each rank's kernel target (default:
    triton on a GPU, the reference interpreter on the CPU). `spin_s`: how long the ranks and the driver poll
    for the next message before sleeping on the pipe (default SPIN_S with NCCL, 0 with gloo). Close them (or
    use `with`) to end the processes."""

    def __init__(self, size: int, backend: str = "gloo", target: str | None = None,
                 spin_s: float | None = None) -> None:
        import multiprocessing as mp

        if backend not in ("gloo", "nccl"):
            raise BackendError(f"Ranks: backend must be 'gloo' (CPU) or 'nccl' (GPU), got {backend!r}")
        self.size, self.backend, self.kind = int(size), backend, backend
        self._spin = float(spin_s) if spin_s is not None else SPIN_S if backend == "nccl" else 0.0
        if backend == "nccl":
            import torch

            if torch.cuda.device_count() < self.size:
                raise BackendError(f"Ranks: {self.size} NCCL ranks need {self.size} GPUs; this host shows "
                                   f"{torch.cuda.device_count()}")
        self._dir = tempfile.mkdtemp(prefix="eidos-ranks-")
        init = f"file://{os.path.join(self._dir, 'store')}"
        ctx = mp.get_context("spawn")
        self._conns, self._procs = [], []
        for r in range(self.size):
            here, there = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(r, self.size, backend, init, target, there, self._spin),
                            name=f"eidos-rank-{r}", daemon=True)
            p.start()
            there.close()
            self._conns.append(here)
            self._procs.append(p)
        self._finalizer = weakref.finalize(self, _stop, self._conns, self._procs, self._dir)
        try:
            _raise([self._recv(r) for r in range(self.size)])
        except BaseException:
            self.close()
            raise
        self.device = "gpu" if backend == "nccl" else "cpu"

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(f"{self.device}:{r}" for r in range(self.size))

    def _recv(self, r: int):
        import pickle

        try:
            _wait(self._conns[r], self._spin)
            return pickle.loads(self._conns[r].recv_bytes())
        except (EOFError, OSError):
            code = self._procs[r].exitcode
            raise BackendError(f"rank {r}'s process ended (exit code {code})") from None

    def run(self, fn, *args, each=None) -> list:
        if not self._procs:
            raise BackendError("run: these ranks are closed")
        if each is None:   # one message for every rank, pickled once
            msg = _dumps((fn, args))
            for conn in self._conns:
                conn.send_bytes(msg)
        else:
            for conn, job in zip(self._conns, _each(self.size, args, each)):
                conn.send_bytes(_dumps((fn, job)))
        return _raise([self._recv(r) for r in range(self.size)])

    def close(self) -> None:
        self._finalizer()
        self._procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _stop(conns, procs, folder) -> None:
    for c in conns:
        try:
            c.send_bytes(_dumps(None))
        except (OSError, ValueError):
            pass
    for p in procs:
        p.join(timeout=20)
        if p.is_alive():
            p.terminate()
            p.join(timeout=5)
    for c in conns:
        c.close()
    shutil.rmtree(folder, ignore_errors=True)
