"""The remote kernel target (eidos.isa.backends.remote) against a service on loopback: buffers live there,
programs run there, and the answers are the local targets' answers."""

from __future__ import annotations

import numpy as np
import pytest

from eidos import isa
from eidos.errors import BackendError, BackendUnavailable
from eidos.isa import Register, Type, registry
from eidos.isa.backends.remote import RemoteBackend
from tests.isa.harness import run_lanes

r0, r1, r2 = Register(0), Register(1), Register(2)


@pytest.fixture
def target(remote):
    return registry.create("remote")                 # on the current connection: `remote`


@pytest.mark.parametrize("service_target", ["cpu", "reference"])
@pytest.mark.parametrize("ty", [Type.F32, Type.F64, Type.I32, Type.U8, Type.I128])
def test_instructions_give_the_local_targets_answers(remote, service_target, ty):
    a, b = [1, 2, 3, 100], [7, 0, 5, 100]
    body = [isa.MUL(r0, r1, r2, ty), isa.ADD(r0, r0, r1, ty)]
    here = run_lanes(registry.create("cpu"), body, [ty, ty], [a, b], ty)
    there = run_lanes(RemoteBackend(remote, service_target), body, [ty, ty], [a, b], ty)
    assert there == here


def test_a_program_travels_once_then_by_its_digest(target):
    body = [isa.ADD(r0, r1, r2, Type.I32)]
    assert run_lanes(target, body, [Type.I32] * 2, [[1, 2], [3, 4]], Type.I32) == [4, 6]
    assert len(target.programs) == 1
    assert run_lanes(target, body, [Type.I32] * 2, [[5, 6], [7, 8]], Type.I32) == [12, 14]   # by digest
    again = RemoteBackend(target.remote)
    again.programs = dict(target.programs)        # another target of the session: the service has the program
    assert run_lanes(again, body, [Type.I32] * 2, [[1, 1], [1, 1]], Type.I32) == [2, 2]


def test_a_digest_the_session_does_not_hold_is_sent_in_full(service, remote):
    from eidos.remote.client import connect
    from tests.remote.conftest import TOKEN

    body = [isa.SUB(r0, r1, r2, Type.I32)]
    first = RemoteBackend(remote)
    assert run_lanes(first, body, [Type.I32] * 2, [[5], [3]], Type.I32) == [2]
    with connect(service.address, token=TOKEN) as other:
        second = RemoteBackend(other)
        second.programs = dict(first.programs)       # digests another session holds: this one refuses them
        assert run_lanes(second, body, [Type.I32] * 2, [[9], [3]], Type.I32) == [6]
        assert list(second.programs) == list(first.programs)


def test_buffers_are_checked_as_every_target_checks_them(target):
    h = target.allocate_typed(4, Type.F32)
    assert (target.buffer_type(h), target.buffer_length(h), target.buffer_size(h)) == (Type.F32, 4, 16)
    target.copy_to_buffer(h, np.arange(4, dtype=np.float32))
    out = np.empty(4, np.float32)
    target.copy_from_buffer(h, out)
    assert out.tolist() == [0, 1, 2, 3]
    with pytest.raises(BackendError, match="the array is float64"):
        target.copy_to_buffer(h, np.zeros(4))
    with pytest.raises(BackendError, match="not a whole number of F32 elements"):
        target.allocate_buffer(10, Type.F32)
    with pytest.raises(BackendError, match="out of bounds|past the end|beyond"):
        target.copy_to_buffer(h, np.zeros(8, np.float32))        # the service's own bounds check
    target.free_buffer(h)
    with pytest.raises(BackendError, match=f"buffer {h} was freed"):
        target.copy_to_buffer(h, b"x")
    assert target.remote.health().memory["pool_used"] >= 0


def test_pools_and_class_memory_live_on_the_service_too(target):
    p = target.allocate_pool(8)
    target.copy_to_pool(p, 2, b"abc")
    out = bytearray(8)
    target.copy_from_pool(p, 0, out)
    assert bytes(out) == b"\x00\x00abc\x00\x00\x00" and target.pool_size(p) == 8
    target.copy_to_class(3, 10, b"xy")
    got = bytearray(2)
    target.copy_from_class(3, 10, got)
    assert got == b"xy" and target.accumulators() == [0.0] * 96 and target.phases() == [0] * 96
    target.free_pool(p)
    with pytest.raises(BackendError, match=f"pool {p} was freed"):
        target.pool_size(p)


def test_each_target_object_has_memory_of_its_own(target):
    from eidos.isa.backends.remote import RemoteBackend

    other = RemoteBackend(target.remote)
    a, b = target.allocate_buffer(4), other.allocate_buffer(4)
    assert a == b                                      # handles count from 1 in each, as in a new target
    target.copy_to_buffer(a, b"aaaa")
    other.copy_to_buffer(b, b"bbbb")
    out = bytearray(4)
    target.copy_from_buffer(a, out)
    assert out == b"aaaa"


def test_without_a_service_the_target_is_unavailable_with_the_reason(monkeypatch):
    import eidos.remote

    monkeypatch.setattr(eidos.remote, "current", lambda: None)
    monkeypatch.delenv("EIDOS_REMOTE", raising=False)
    with pytest.raises(BackendUnavailable, match="ei.connect"):
        registry.create("remote")               # registered by its entry point, as every target


def test_a_checked_program_is_checked_again_once_typed_buffers_change(target):
    """The target checks a program against its typed buffers before sending it, once per memory generation:
    allocating or freeing a buffer moves the generation, so a check made before cannot go stale."""
    from eidos.errors import IsaError

    one = isa.LaunchConfig.linear(1)
    first = target.allocate_typed(4, Type.F32)
    later = first + 1                                 # the handle the next allocation gets
    program = isa.ProgramBuilder().add(isa.ParallelMap(isa.Address.buffer(first), isa.Address.buffer(later), 4,
                                                       isa.MapOperation.Abs, Type.F32)).build()
    target.check_params(isa.ExecutionParams(one), program)   # `later` is not yet a typed buffer
    assert target.allocate_typed(4, Type.I32) == later
    with pytest.raises(IsaError, match=f"buffer {later} holds I32"):
        target.check_params(isa.ExecutionParams(one), program)
    with pytest.raises(IsaError, match=f"buffer {later} holds I32"):
        target.execute_program(program, one)
    target.free_buffer(later)
    target.check_params(isa.ExecutionParams(one), program)   # its type went with it
