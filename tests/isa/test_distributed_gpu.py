"""The collectives, a split buffer and sharded tensors over NCCL between two GPUs (one process each, the
triton target on each), against the reference's definition and one device. Runs on a host with 2 GPUs."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest


def _gpus() -> int:
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


pytestmark = pytest.mark.skipif(_gpus() < 2, reason="needs 2 CUDA GPUs for NCCL (the H100 x2 machine runs these)")


@pytest.fixture(scope="module")
def nccl():
    import os

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")   # NVLink multicast stays off on shared hosts
    from eidos.isa.distributed import Ranks

    with Ranks(2, "nccl") as ranks:
        yield ranks


def test_collectives_over_nccl_equal_the_definition(nccl):
    from tests.isa.test_distributed import CASES, _check, _collectives

    assert nccl.devices == ("gpu:0", "gpu:1")
    _check(nccl.run(_collectives, CASES, 5), CASES, 5)


def test_split_and_sharded_tensors_on_two_gpus(nccl):
    from eidos.isa import BinaryMapOperation as B
    from eidos.isa import MapOperation as M
    from eidos.isa import ReduceOperation, Type
    from eidos.isa.distributed import SimulatedRanks, Split
    from eidos.tensor.sharded import replicate, shard
    from tests.isa.distributed import same, values

    x = values(4, 0, 100_003, Type.F32)
    x[~np.isfinite(x)] = 2.0
    here, one = Split.scatter(nccl, x), Split.scatter(SimulatedRanks(1), x)
    same(here.map(M.Abs, (B.Mul, 0.5)).gather(), one.map(M.Abs, (B.Mul, 0.5)).gather())
    assert here.reduce(ReduceOperation.Max, M.Neg) == one.reduce(ReduceOperation.Max, M.Neg)
    np.testing.assert_allclose(here.sum(M.Abs), one.sum(M.Abs), rtol=1e-5)
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (301, 64)).astype(np.float32)
    b = rng.integers(-4, 5, (64, 33)).astype(np.float32)
    c = shard(nccl, a, 0) @ replicate(nccl, b)
    assert c.devices == ("gpu:0", "gpu:1")
    np.testing.assert_array_equal(c.gather().numpy(), a @ b)
    np.testing.assert_array_equal((replicate(nccl, a) @ shard(nccl, b, 1)).gather().numpy(), a @ b)
    s = shard(nccl, a, 0)
    np.testing.assert_allclose(((s * 2.0).abs()).sum(), np.abs(a * 2).sum(), rtol=1e-6)


def test_the_triton_lane_splits_a_rowwise_part_over_two_gpus():
    import pyarrow as pa

    import eidos as ei
    from eidos import col
    from eidos.lanes.triton import execute as X
    from eidos.lanes.triton.target import Device
    from eidos.testing.compare import assert_tables_equal

    flow = ei.from_arrow(pa.table({"a": np.arange(100_001, dtype=np.float64)})).filter(col("a") > 3.0) \
        .select(x=col("a") * 2.0 + 1.0)
    devices = [Device("triton", index=0), Device("triton", index=1)]
    assert [str(d.device) for d in devices] == ["cuda:0", "cuda:1"]
    got = X.execute(flow.plan.optimized, devices=devices)
    assert_tables_equal(got, flow.run(engine="reference"), ordered=True, float_rel=0)


def _own_gpu(rank):
    import eidos as ei

    t = ei.tensor([1.0, 2.0], device=f"gpu:{rank.rank}") * 2.0
    return t.device, (t.numpy() == [2.0, 4.0]).all()


def test_each_rank_names_its_gpu(nccl):
    assert nccl.run(_own_gpu) == [("gpu", True), ("gpu", True)]


def _chains_both_ways(rank, key, chains):
    """Each chain reduced on this rank as one executor program (sharded._chain) and by the tensor layer
    (sharded._reduce), the partials combined over the ranks either way; five runs each, so the program's
    CUDA graph (captured at its third run, its AllReduce in it) is replayed."""
    from eidos.tensor import sharded as S

    out = []
    for c, (ops, name) in enumerate(chains):
        steps, prev = [], key
        for j, (op, *scalar) in enumerate(ops):
            steps.append((f"{key}-{c}-{j}", op, [("s", prev)] + [("v", v) for v in scalar]))
            prev = steps[-1][0]
        for _ in range(5):
            fast = S._then(rank, steps, S._reduce, (prev, name, False))[1]
            slow = S._reduce(rank, prev, name, False)
            out.append((c, float(fast), float(slow)))
    graphs = [g for g in rank.target._graphs.values() if g.graph is not None and g.program.metadata.get("eidos.tensor")
              is None]
    return out, len(graphs)


def test_a_sharded_chain_runs_as_one_graphed_program_with_the_tensor_layers_answer(nccl):
    from eidos.tensor.sharded import shard

    rng = np.random.default_rng(11)
    chains = [((("mul", 2.0), ("abs",)), "sum"), ((("add", 0.5), ("exp",), ("truediv", 3.0)), "sum"),
              ((("neg",), ("sub", 1)), "max"), ((("tanh",),), "min"), ((("mul", 1.001),), "prod")]
    for dtype in (np.float32, np.float64):
        x = shard(nccl, rng.standard_normal(200_003).astype(dtype), 0)
        got, graphs = zip(*nccl.run(_chains_both_ways, x.key, chains))
        for (c, fast, slow) in got[0]:
            assert fast == slow or (np.isnan(fast) and np.isnan(slow)), (dtype, chains[c], fast, slow)
        assert got[0] == got[1]   # every rank holds the combined value
        assert min(graphs) >= len(chains), graphs   # each chain's program replayed as a graph, AllReduce in it
        x.free()
