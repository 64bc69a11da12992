"""The collective instructions across devices: each rank's target runs them through the group, and every
result equals the reference interpreter's definition over the ranks' inputs (reference/arrays.py), here
across two processes joined by gloo, and in the reference's own simulated group."""

from __future__ import annotations

import numpy as np
import pytest

from eidos import isa
from eidos.errors import BackendError, ExecutionError, UnsupportedError
from eidos.isa import Address, LaunchConfig, ReduceOperation, Type
from eidos.isa.backends.reference import arrays as ref
from eidos.isa.distributed import SimulatedRanks
from tests.isa.distributed import FLOAT_TYPES, INT_TYPES, gloo_ranks, same, values

OPS = tuple(ReduceOperation)
CASES = [(op, ty, n) for ty in INT_TYPES + FLOAT_TYPES for op in OPS for n in (0, 7)]


def _put(t, x, ty, count=None):
    h = t.allocate_typed(max(count if count is not None else len(x), 1), ty)
    if len(x):
        t.copy_to_buffer(h, np.ascontiguousarray(x))
    return h


def _get(t, h, ty, n):
    out = np.empty(n, ty.np_dtype)
    if n:
        t.copy_from_buffer(h, out)
    return out


def _collectives(rank, cases, seed, target=None):
    """Every case on this rank's target (or a new one of `target`, joined to the rank's group), as one program
    per case: AllReduce in place, AllGather, Broadcast from rank 1, ReduceScatter; the results per case."""
    from eidos.isa import registry

    t = rank.target
    if target is not None:
        t = registry.create(target)
        t.join(rank.group)
    out = []
    for op, ty, n in cases:
        x = values(seed, rank.rank, n, ty)
        w = values(seed + 1, rank.rank, 2 * n, ty)
        a, g, b, s, r = _put(t, x, ty), _put(t, [], ty, 2 * n), _put(t, x, ty), _put(t, w, ty), _put(t, [], ty, n)
        prog = (isa.ProgramBuilder()
                .add(isa.AllReduce(Address.buffer(a), n, op, ty=ty))
                .add(isa.AllGather(Address.buffer(g), Address.buffer(b), n, ty=ty))
                .add(isa.Broadcast(Address.buffer(b), n, 1, ty=ty))
                .add(isa.ReduceScatter(Address.buffer(r), Address.buffer(s), n, op, ty=ty))
                .build())
        t.execute_program(prog, LaunchConfig.linear(1))
        out.append((_get(t, a, ty, n), _get(t, g, ty, 2 * n), _get(t, b, ty, n), _get(t, r, ty, n)))
        for h in (a, g, b, s, r):
            t.free_buffer(h)
    return out


def _check(results, cases, seed) -> None:
    for i, (op, ty, n) in enumerate(cases):
        xs = [values(seed, r, n, ty) for r in (0, 1)]
        ws = [values(seed + 1, r, 2 * n, ty) for r in (0, 1)]
        reduced, scattered = ref.all_reduce(xs, op, ty), ref.all_reduce(ws, op, ty)
        for rank in (0, 1):
            a, g, b, r = results[rank][i]
            same(a, reduced)
            same(g, ref.all_gather(xs))
            same(b, xs[1])
            same(r, scattered[rank * n:(rank + 1) * n])


@pytest.mark.parametrize("target", [None, "cpu"], ids=["reference", "cpu"])
def test_collectives_over_gloo_equal_the_definition(target):
    """Every reduction operator, every type up to 64 bits, 0 and 7 elements, on each rank's reference
    interpreter and on a cpu target joined to the same group."""
    _check(gloo_ranks().run(_collectives, CASES, 5, target), CASES, 5)


def test_collectives_in_the_simulated_group_equal_the_definition():
    cases = [c for c in CASES if c[2]]
    _check(SimulatedRanks(2).run(_collectives, cases, 9), cases, 9)


def _subsets(rank):
    t = rank.target
    x = np.array([rank.rank + 1, 10 * (rank.rank + 1)], np.int32)
    h = _put(t, x, Type.I32)
    t.execute_program(isa.ProgramBuilder().add(isa.AllReduce(Address.buffer(h), 2, ReduceOperation.Sum,
                                                             (1,), Type.I32)).build(), LaunchConfig.linear(1))
    alone = _get(t, h, Type.I32, 2)
    t.execute_program(isa.ProgramBuilder().add(isa.Broadcast(Address.buffer(h), 2, 0, (0, 1), Type.I32)).build(),
                      LaunchConfig.linear(1))
    return alone, _get(t, h, Type.I32, 2)


@pytest.mark.parametrize("ranks", ["gloo", "simulated"])
def test_devices_name_the_ranks_taking_part(ranks):
    group = gloo_ranks() if ranks == "gloo" else SimulatedRanks(2)
    (alone0, b0), (alone1, b1) = group.run(_subsets)
    assert alone0.tolist() == [1, 10] and alone1.tolist() == [2, 20]   # a group of one: unchanged
    assert b0.tolist() == b1.tolist() == [1, 10]


def _bad_devices(rank):
    t = rank.target
    h = _put(t, np.zeros(2, np.float32), Type.F32)
    t.execute_program(isa.ProgramBuilder().add(isa.AllReduce(Address.buffer(h), 2, ReduceOperation.Sum,
                                                             (1, 0))).build(), LaunchConfig.linear(1))


def test_a_failure_on_the_ranks_names_the_rank_and_the_problem():
    with pytest.raises(ExecutionError, match=r"rank 0: BackendError: .*ascending order"):
        gloo_ranks().run(_bad_devices)
    with pytest.raises(ExecutionError, match="rank 1"):
        SimulatedRanks(2).run(_bad_devices)


def test_without_a_group_collectives_are_unsupported():
    t = isa.backends.ReferenceBackend()
    h = _put(t, np.zeros(4, np.float32), Type.F32)
    with pytest.raises(UnsupportedError, match="ReduceScatter.*no device group"):
        t.execute_program(isa.ProgramBuilder().add(isa.ReduceScatter(Address.buffer(h), Address.buffer(h), 2,
                                                                     ReduceOperation.Max)).build(),
                          LaunchConfig.linear(1))
    with pytest.raises(BackendError, match="ascending"):
        ref.members((1, 1), 2)


def test_the_definition_with_more_ranks():
    """Sum over three or more ranks is the exact sum rounded once (not a chain of roundings); integers wrap."""
    x = [np.array([1e8, 1.0], np.float32), np.array([1.0, 1e8], np.float32), np.array([-1e8, -1e8], np.float32)]
    assert ref.all_reduce(x, ReduceOperation.Sum, Type.F32).tolist() == [1.0, 1.0]   # in f32 order: 0.0
    i = [np.array([100], np.int8)] * 3
    assert ref.all_reduce(i, ReduceOperation.Sum, Type.I8).tolist() == [44]
    assert ref.all_reduce(i, ReduceOperation.Product, Type.I8).tolist() == [64]   # 10**6 mod 256


# ---- the data-parallel executor: a buffer split over the ranks --------------------------------------

@pytest.mark.parametrize("ranks", ["gloo", "simulated-3"])
@pytest.mark.parametrize("n", [0, 1, 7, 1001])
def test_split_maps_and_reductions_equal_one_device(ranks, n):
    """A buffer split over the ranks (n not divisible by their number, some ranks empty), mapped, reduced
    (partials combined by AllReduce) and gathered (AllGather), against the same on one reference device."""
    from eidos.isa import BinaryMapOperation as B
    from eidos.isa import MapOperation as M
    from eidos.isa.distributed import Split

    group = gloo_ranks() if ranks == "gloo" else SimulatedRanks(3)
    one = SimulatedRanks(1)
    x = values(3, 0, n, Type.F32)
    x[~np.isfinite(x)] = 1.5
    steps = (M.Abs, (B.Mul, 0.5), M.Sqrt)
    here, there = Split.scatter(group, x), Split.scatter(one, x)
    assert sum(here.counts) == n and max(here.counts) - min(here.counts) <= 1
    same(here.gather(), x)
    same(here.map(*steps).gather(), there.map(*steps).gather())
    for op in (ReduceOperation.Min, ReduceOperation.Max):
        same(np.float32(here.reduce(op, *steps)), np.float32(there.reduce(op, *steps)))
    np.testing.assert_allclose(here.sum(*steps), there.sum(*steps), rtol=1e-6)
    assert here.sum(*steps) == here.sum(*steps)  # the kept program and partial buffer, run again
    i = np.arange(n, dtype=np.int64) * 7919 - 3
    assert Split.scatter(group, i).sum((B.Mul, 3)) == Split.scatter(one, i).sum((B.Mul, 3)) == (i * 3).sum()
    here.free()  # with the kept programs' partial buffers
    again = Split.scatter(group, x)  # may reuse the freed handle: the kept program must not come back
    np.testing.assert_allclose(again.sum(*steps), there.sum(*steps), rtol=1e-6)
    again.free()
