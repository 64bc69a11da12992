"""Sharded tensors: shards stay on their ranks between operations; element-wise chains, reductions, the
model-parallel GEMM and gathers equal the same on one device, over gloo processes and the simulated group."""

from __future__ import annotations

import numpy as np
import pytest

import eidos as ei
from eidos.errors import ShapeError
from eidos.isa.distributed import SimulatedRanks
from eidos.tensor.sharded import make, replicate, shard
from tests.isa.distributed import gloo_ranks


@pytest.fixture(params=["gloo", "simulated-3"])
def ranks(request):
    return gloo_ranks() if request.param == "gloo" else SimulatedRanks(3)


def test_a_chain_stays_on_the_ranks_and_equals_one_device(ranks):
    x = np.random.default_rng(1).normal(size=(7, 5)).astype(np.float32)
    a = shard(ranks, x, axis=0)
    assert a.devices == tuple(f"cpu:{r}" for r in range(ranks.size)) and sum(a.sizes) == 7
    y = ((a * 2.0 + 1.0).tanh() - a).abs()
    want = ((ei.tensor(x) * 2.0 + 1.0).tanh() - ei.tensor(x)).abs()
    np.testing.assert_array_equal(y.numpy(), want.numpy())
    assert y.max() == want.max().numpy() and y.min() == want.min().numpy()
    np.testing.assert_allclose(y.sum(), want.sum().numpy(), rtol=1e-6)
    col = shard(ranks, x, axis=1)
    np.testing.assert_array_equal((col * col).numpy(), (ei.tensor(x) * ei.tensor(x)).numpy())
    assert shard(ranks, np.arange(5, dtype=np.int32), 0).sum() == 10


@pytest.mark.parametrize("m,k,n", [(5, 3, 4), (1, 2, 7)])
def test_model_parallel_gemm(ranks, m, k, n):
    rng = np.random.default_rng(m * n)
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)   # small integers: every order of summing is exact
    b = rng.integers(-4, 5, (k, n)).astype(np.float32)
    want = a @ b
    rows = shard(ranks, a, 0) @ replicate(ranks, b)
    cols = replicate(ranks, a) @ shard(ranks, b, 1)
    inner = shard(ranks, a, 1) @ shard(ranks, b, 0)
    assert (rows.axis, cols.axis, inner.axis) == (0, 1, None)
    for c in (rows, cols, inner):
        np.testing.assert_array_equal(c.numpy(), want)
    np.testing.assert_array_equal(rows.gather().numpy(), want)
    np.testing.assert_array_equal(cols.gather().numpy(), want)
    with pytest.raises(ShapeError, match="no model-parallel form"):
        shard(ranks, a, 0) @ shard(ranks, b, 0)


def _fill(rank, shape):
    return np.full(shape, rank.rank + 1, np.float32)


def test_ranks_make_their_own_shards(ranks):
    s = make(ranks, (5, 2), "float32", 0, _fill)
    want = np.concatenate([np.full((c, 2), r + 1, np.float32) for r, c in enumerate(s.sizes)])
    np.testing.assert_array_equal(s.numpy(), want)
    s.free()


def test_a_second_gpu_is_reached_through_ranks():
    """'gpu:N' names this process's GPU only (a rank's own, in a group); another GPU is a sharded tensor's."""
    with pytest.raises(ei.errors.DeviceError, match="eidos.tensor.sharded"):
        ei.tensor([1.0], device="gpu:7")


def test_a_chain_and_its_reduction_are_one_message_to_the_ranks():
    ranks = SimulatedRanks(2)
    a = shard(ranks, np.arange(6, dtype=np.float32), 0)
    sent = []
    run = ranks.run
    ranks.run = lambda fn, *args, **kw: sent.append(fn.__name__) or run(fn, *args, **kw)
    y = ((a * 2.0) + 1.0).abs()
    assert sent == [] and y.sum() == 36.0 and sent == ["_then"]
    assert y.dtype == np.float32 and sent == ["_then"]


def test_a_gpu_ranks_chain_runs_as_the_executors_program_with_the_tensor_layers_answer():
    """sharded._chain on a GPU rank (here Triton's interpreter where there is no GPU), one rank in its
    group: the chains it takes give the tensor layer's bytes and keep one program per (shard, chain);
    the shapes it leaves (a second shard, a map with no ISA form, an integer shard) go to the tensor layer."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tests.isa.conftest import use_triton_interpreter_without_cuda

    use_triton_interpreter_without_cuda()
    from eidos.isa.backends.triton import TritonBackend
    from eidos.isa.distributed.group import Group
    from eidos.isa.distributed.ranks import Rank
    from eidos.tensor import sharded as S

    class Alone(Group):   # one rank: every collective leaves the buffer as it is
        def all_reduce(self, array, op, ty, devices=()) -> None:
            pass

    target = TritonBackend()
    target.join(Alone())
    rank = Rank(0, 1, target.memory.group, target, "gpu")
    rng = np.random.default_rng(5)
    rank.store["x"] = ei.tensor(rng.standard_normal(999).astype(np.float32), device="gpu")
    rank.store["w"] = ei.tensor(rng.integers(-9, 9, 999).astype(np.int32), device="gpu")

    def chain(source, *ops):
        steps, prev = [], source
        for j, (op, *v) in enumerate(ops):
            steps.append((f"{source}{j}", op, [("s", prev)] + [("v", x) for x in v]))
            prev = steps[-1][0]
        return steps, prev

    for ops, name in (((("mul", 2.0), ("abs",)), "sum"), ((("sub", 1), ("neg",)), "max")):
        steps, last = chain("x", *ops)
        for _ in range(2):
            fast = S._then(rank, steps, S._reduce, (last, name, False))[1]
            assert S._chain(rank, steps, last, name, False) is not None
            assert fast.tobytes() == S._reduce(rank, last, name, False).tobytes()
    assert len([m for m in rank.store if m[0] == "fused"]) == 2   # one program per chain, kept
    for steps, last in (chain("x", ("floor",)), chain("w", ("mul", 2)),
                        ([("y", "add", [("s", "x"), ("s", "x")])], "y")):
        S._then(rank, steps, None, ())
        assert S._chain(rank, steps, last, "sum", False) is None
    S._free(rank, "x")
    assert not [m for m in rank.store if m[0] in ("fused", "adopted")]   # its buffer and programs went with it
