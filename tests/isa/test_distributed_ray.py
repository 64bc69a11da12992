"""Ranks on Ray actors (the cluster lane's Ray), joined by gloo here: the collectives, a split buffer and
sharded tensors give what the definition and one device give."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from eidos.isa import ReduceOperation, Type
from eidos.isa.backends.reference import arrays as ref
from tests.isa.distributed import same, values

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None or importlib.util.find_spec("torch") is None,
                                reason="ray and torch are needed (pip install 'eidos[ray,gpu]')")


def _all_reduce(rank, op):
    from tests.isa.test_distributed import _collectives

    return _collectives(rank, [(op, Type.F32, 7), (op, Type.U16, 5)], 11)


def test_two_actors_run_the_collectives_a_split_buffer_and_a_sharded_gemm(ray_cluster):
    from eidos.isa.distributed import Split, ray_ranks
    from eidos.tensor.sharded import replicate, shard

    with ray_ranks(2) as ranks:
        assert ranks.devices == ("cpu:0", "cpu:1")
        got = ranks.run(_all_reduce, ReduceOperation.Max)
        for i, (ty, n) in enumerate([(Type.F32, 7), (Type.U16, 5)]):
            want = ref.all_reduce([values(11, r, n, ty) for r in (0, 1)], ReduceOperation.Max, ty)
            same(got[0][i][0], want)
            same(got[1][i][0], want)
        x = np.arange(9, dtype=np.int64)
        s = Split.scatter(ranks, x)
        assert s.counts == [5, 4] and s.sum() == 36
        same(s.gather(), x)
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        c = shard(ranks, a, 0) @ replicate(ranks, a.T)
        np.testing.assert_array_equal(c.gather().numpy(), a @ a.T)
