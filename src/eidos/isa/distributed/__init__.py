"""Atlas ISA programs across devices: device groups for the collective instructions, ranks that run them,
and the executor that splits work over the ranks (docs/isa-distributed.md).

- group.py: `Group` (one rank's view: AllReduce, AllGather, Broadcast, ReduceScatter) and `Simulated`,
  the reference's group (ranks as threads; the definition in backends/reference/arrays.py).
- process_group.py: `TorchGroup`, over torch.distributed (gloo between CPU processes, NCCL between GPUs).
- ranks.py: `Ranks` (one spawned process per rank on this host) and `Simulated` ranks; `run(fn, *args)`.
- ray.py: `RayRanks`, one Ray actor per rank (one GPU each on a GPU cluster), NCCL or gloo between them.
- executor.py: `Split`, a 1-D buffer over the ranks: data-parallel maps and reductions (partials combined
  by AllReduce), gathered by AllGather. Sharded tensors and the model-parallel GEMM are eidos.tensor.sharded.

A kernel target joins a group with `target.join(group)`; its collective instructions then run across it.
Nothing here imports torch or ray until a group or a rank is made.
"""

from __future__ import annotations

from .executor import Split
from .group import Group
from .ranks import Rank, Ranks
from .ranks import Simulated as SimulatedRanks


def ray_ranks(size: int, **kw):
    """`size` Ray actors, one rank each (eidos.isa.distributed.ray.RayRanks)."""
    from .ray import RayRanks

    return RayRanks(size, **kw)


__all__ = ["Group", "Rank", "Ranks", "SimulatedRanks", "Split", "ray_ranks"]
