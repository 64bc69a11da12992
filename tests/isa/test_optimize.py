"""Program.optimize() keeps every result identical; each pass does what it says."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from eidos import isa
from eidos.isa import Address, BinaryMapOperation, Label, LaunchConfig, MapOperation, Predicate, Register, Type
from eidos.testing.strategies import examples
from tests.isa import strategies as S

R = Register
I32, F32, U64 = Type.I32, Type.F32, Type.U64


def _reference():
    from eidos.isa.backends import ReferenceBackend
    return ReferenceBackend()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S.programs())
def test_optimized_programs_compute_the_same_bytes(gp):
    optimized = gp.program.optimize()
    assert len(optimized) <= len(gp.program)
    be = _reference()
    assert S.run(be, gp, optimized) == S.run(be, gp)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S.programs(loops=False, branches=False))
def test_optimized_straight_line_programs_too(gp):
    be = _reference()
    assert S.run(be, gp, gp.program.optimize()) == S.run(be, gp)


def test_constants_fold_and_dead_code_goes():
    b = isa.ProgramBuilder().add(
        isa.MOV_IMM(R(1), 6, I32), isa.MOV_IMM(R(2), 7, I32), isa.MUL(R(3), R(1), R(2), I32),
        isa.MOV_IMM(R(9), 123, I32),                            # dead
        isa.SETcc(Predicate(0), R(1), R(2), isa.Condition.LT, I32),
        isa.BRA(Label("done"), Predicate(0)),                   # always taken
        isa.MOV_IMM(R(3), 0, I32))                              # unreachable
    b.label("done")
    b.add(isa.STG(Address.buffer(1), R(3), I32))
    p = b.build().optimize()
    assert [i.name for i in p] == ["MOV_IMM", "STG"] and p.instructions[0] == isa.MOV_IMM(R(3), 42, I32)
    assert p.labels == {"done": 1}


def test_peepholes():
    b = isa.ProgramBuilder().add(
        isa.LDG(R(1), Address.buffer(1), I32), isa.MOV_IMM(R(2), 0, I32), isa.ADD(R(3), R(1), R(2), I32),
        isa.MOV_IMM(R(4), 1, I32), isa.MUL(R(5), R(3), R(4), I32), isa.MOV(R(5), R(5), I32),
        isa.LDG(R(6), Address.buffer(1), F32), isa.MOV_IMM(R(7), 0.0, F32), isa.ADD(R(8), R(6), R(7), F32),
        isa.BRA(Label("next")))
    b.label("next")
    b.add(isa.STG(Address.buffer(2), R(5), I32), isa.STG(Address.buffer(3), R(8), F32))
    p = b.build().optimize()
    names = [str(i.name) for i in p]
    assert "BRA" not in names
    assert isa.MOV(R(3), R(1), I32) in p.instructions and isa.MOV(R(5), R(3), I32) in p.instructions
    assert isa.ADD(R(8), R(6), R(7), F32) in p.instructions   # x + 0.0 is not x for x = -0.0: kept


def _chain(a, b, c, n=64):
    return [isa.ParallelMapBinary(Address.buffer(c), Address.buffer(a), Address.buffer(b), n, BinaryMapOperation.Add),
            isa.ParallelMap(Address.buffer(c), Address.buffer(c), n, MapOperation.Relu),
            isa.ParallelMapBinary(Address.buffer(b), Address.buffer(c), Address.buffer(a), n, BinaryMapOperation.Mul)]


def test_map_chains_fuse_into_one_pass_with_identical_results(backend):
    n = 64
    x, y = np.linspace(-4, 4, n).astype(np.float32), np.linspace(3, -2, n).astype(np.float32)
    results = []
    for optimize in (False, True):
        a, b, c = (backend.allocate_buffer(4 * n) for _ in range(3))
        backend.copy_to_buffer(a, x)
        backend.copy_to_buffer(b, y)
        p = isa.ProgramBuilder().add(*_chain(a, b, c, n)).build()
        if optimize:
            p = p.optimize()
            assert [i.name for i in p] == ["FusedMap"] and len(p[0].steps) == 3
        backend.execute_program(p, LaunchConfig.linear(n))
        out = np.empty(n, np.float32)
        backend.copy_from_buffer(b, out)
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], np.maximum(x + y, 0) * x)


def test_fusion_stops_at_partial_overlap_labels_and_changes_of_count():
    p = isa.ProgramBuilder().add(
        isa.ParallelMap(Address.buffer(1), Address.buffer(2), 8, MapOperation.Abs),
        isa.ParallelMap(Address.buffer(2, 4), Address.buffer(1), 8, MapOperation.Neg),   # overlaps buffer 2 partly
        isa.ParallelMap(Address.buffer(3), Address.buffer(3), 9, MapOperation.Neg),      # another count
        isa.ParallelMap(Address.register(R(1)), Address.buffer(3), 9, MapOperation.Neg)  # not static
    ).build().optimize()
    assert [i.name for i in p] == ["ParallelMap"] * 4
    b = isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(1), Address.buffer(2), 8, MapOperation.Abs))
    b.label("again")
    b.add(isa.ParallelMap(Address.buffer(1), Address.buffer(1), 8, MapOperation.Neg), isa.BRA(Label("again"), Predicate(1)))
    assert [i.name for i in b.build().optimize()] == ["ParallelMap", "ParallelMap", "BRA"]


def test_fused_program_round_trips_and_disassembles():
    p = isa.ProgramBuilder().add(*_chain(1, 2, 3)).build().optimize()
    assert isa.Program.from_json(p.to_json()) == p
    assert "FusedMap.F32 count=64, steps=([buf3+0] = Add([buf1+0], [buf2+0])" in str(p)


def test_optimize_keeps_calls_and_their_registers():
    b = isa.ProgramBuilder().add(isa.MOV_IMM(R(1), 5, I32), isa.CALL(Label("f")),
                                 isa.STG(Address.buffer(1), R(1), I32), isa.EXIT())
    b.label("f")
    b.add(isa.ADD(R(1), R(1), R(1), I32), isa.RET())
    p = b.build()
    assert p.optimize() == p or len(p.optimize()) == len(p)


def test_a_fused_map_that_breaks_the_fusion_condition_is_an_error(backend):
    from eidos.errors import BackendError
    from eidos.isa import MapStep
    h = backend.allocate_buffer(64)
    bad = isa.FusedMap(8, (MapStep(Address.buffer(h), MapOperation.Abs, Address.buffer(h)),
                           MapStep(Address.buffer(h, 4), MapOperation.Neg, Address.buffer(h))))
    with pytest.raises(BackendError, match="partially overlaps"):
        backend.execute_program(isa.ProgramBuilder().add(bad).build(), LaunchConfig.linear(1))
