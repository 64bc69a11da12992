"""Ranks on Ray actors, one device each: the same run(fn, *args) as Ranks, across the nodes of a cluster.

Each actor is one rank (with NCCL it asks Ray for one GPU, which Ray makes its only visible one); rank 0's
actor names a TCP address on its node and every actor joins the torch.distributed group there. The driver
must be connected to Ray already (the cluster lane's connect, or ray.init).
"""

from __future__ import annotations

import socket

from eidos.errors import BackendUnavailable

from .ranks import _call, _each, _raise, setup


class _Actor:
    """One rank in a Ray actor's process."""

    def __init__(self) -> None:
        self.rank = None

    def address(self) -> str:
        import ray

        host = ray.util.get_node_ip_address()
        with socket.socket() as s:   # a free port on this node (released for the group's store to take)
            s.bind((host, 0))
            return f"tcp://{host}:{s.getsockname()[1]}"

    def setup(self, rank, size, backend, init_method, target) -> None:
        self.rank = setup(rank, size, backend, init_method, target)   # Ray shows the actor its one GPU: 0

    def run(self, fn, args):
        return _call(self.rank, fn, args)

    def close(self) -> None:
        import torch.distributed as dist

        if self.rank is not None:
            self.rank.store.clear()
        if dist.is_initialized():
            dist.destroy_process_group()


class RayRanks:
    """`size` Ray actors joined by torch.distributed: 'nccl' (one GPU per actor) or 'gloo' (CPU).
    `num_cpus` is what each actor holds of the cluster's CPUs (0: it does not keep tasks waiting)."""

    def __init__(self, size: int, backend: str = "gloo", target: str | None = None, num_cpus: float = 0) -> None:
        try:
            import ray
        except ImportError as e:
            raise BackendUnavailable("RayRanks needs ray (pip install 'eidos[ray]')") from e
        if not ray.is_initialized():
            raise BackendUnavailable("RayRanks: this process is not connected to Ray (ray.init(), or run a "
                                     "flow on the ray lane first, which connects)")
        self.size, self.backend, self.kind = int(size), backend, f"ray-{backend}"
        self.device = "gpu" if backend == "nccl" else "cpu"
        cls = ray.remote(num_cpus=num_cpus, num_gpus=1 if backend == "nccl" else 0)(_Actor)
        self._ray = ray
        self._actors = [cls.remote() for _ in range(self.size)]
        try:
            init = ray.get(self._actors[0].address.remote())
            ray.get([a.setup.remote(r, self.size, backend, init, target) for r, a in enumerate(self._actors)])
        except BaseException:
            self.close()
            raise

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(f"{self.device}:{r}" for r in range(self.size))

    def run(self, fn, *args, each=None) -> list:
        jobs = _each(self.size, args, each)
        return _raise(self._ray.get([a.run.remote(fn, job) for a, job in zip(self._actors, jobs)]))

    def close(self) -> None:
        ray, actors, self._actors = self._ray, self._actors, []
        try:
            ray.get([a.close.remote() for a in actors], timeout=60)
        except Exception:  # noqa: BLE001, S110 - the actors are killed below either way
            pass
        for a in actors:
            ray.kill(a)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
