"""How a thread fails, in the same words on every target.

The limits every target enforces (call depth, backward jumps), the fault codes compiled code
records, the BackendErrors they become, and `replay_access`: a compiled target that saw an access
fail re-runs that one instruction in the reference interpreter, so its error is the reference's,
word for word (the reference is the oracle; its messages are the contract).
"""

from __future__ import annotations

from eidos.errors import BackendError

MAX_CALL_DEPTH = 1024          # nested CALLs one thread may make
DEFAULT_MAX_STEPS = 10_000_000  # backward jumps one thread may take before it is taken to be in an endless loop

# What a compiled thread records when it stops on a fault (0: none).
E_MEMORY, E_BUDGET, E_STACK, E_NEIGHBOUR, E_BARRIER = 1, 2, 3, 4, 5


def step_limit_error(i: int) -> BackendError:
    """The error of a thread past its backward-jump budget."""
    return BackendError(f"instruction {i}: thread ran past the step limit (an endless loop?); "
                        "raise ReferenceBackend(max_steps=...) if it is meant to run this long")


def stack_overflow_error(i: int) -> BackendError:
    return BackendError(f"instruction {i}: call stack overflow ({MAX_CALL_DEPTH} nested CALLs)")


def barrier_ids_error(block: int, ids) -> BackendError:
    return BackendError(f"block {block}: threads wait at BarSync with different ids {sorted(ids)}")


def store_error(what: str, v, ty, e) -> BackendError:
    """A register value that its store type cannot hold (a kernel argument of another type, say)."""
    return BackendError(f"{what}: cannot store {v!r} as {ty.name} ({e})")


def divergence_error(waits, instructions, barrier: int) -> BackendError:
    """Threads stopped at different synchronization points. `waits`: (state, instruction) pairs, the
    instruction being the one after a BarSync (state == barrier) or the collective a thread waits at."""
    where = ", ".join(sorted(f"BarSync before instruction {pc}" if s == barrier
                             else f"{instructions[pc].name} at instruction {pc}" for s, pc in waits))
    return BackendError("threads diverged at a synchronization point: a barrier needs every live thread of its block, "
                        f"a collective every live thread of the grid; threads wait at: {where}")


def fault_error(program, code: int, i: int, thread: int, replay) -> BackendError:
    """The error of a compiled thread's fault record (code, instruction i); `replay()` re-runs a failed
    memory access in the reference interpreter, which raises the exact error."""
    if code == E_BUDGET:
        return step_limit_error(i)
    if code == E_STACK:
        return stack_overflow_error(i)
    if code in (E_MEMORY, E_NEIGHBOUR):
        replay()
    return BackendError(f"instruction {i} ({program.instructions[i].name}): failed in thread {thread} (code {code})")


def written_unsigned(program, i: int, reg: int) -> bool:
    """Whether register `reg`, read at instruction i, was last written (in program order) as an unsigned
    integer: compiled targets hold a U64 as its int64 bit pattern, the reference as the unsigned int."""
    for j in range(i - 1, -1, -1):
        ins = program.instructions[j]
        if any(getattr(r, "index", None) == reg for r in ins.registers_written() if type(r).__name__ == "Register"):
            ty = getattr(ins, "dst_ty", None) or getattr(ins, "ty", None)
            return bool(getattr(ty, "is_unsigned", False))
    return False


def replay_access(program, i: int, value: int, memory, config, max_steps: int) -> None:
    """Run instruction i alone in the reference interpreter over `memory`, every register it reads
    holding `value` (the address a compiled thread failed on): it raises the reference's BackendError
    for that access."""
    from types import SimpleNamespace

    from .backends.reference.compile import DECODERS, Context

    ins = program.instructions[i]
    R = [0] * 256
    for r in ins.registers_read():
        R[r.index] = value + (1 << 64) if value < 0 and written_unsigned(program, i, r.index) else value
    L = SimpleNamespace(shared=memoryview(bytearray(config.shared_memory)), stack=[], budget=1,
                        state=None, pc=i, wait=None)
    DECODERS[type(ins)](ins, i, Context(memory, program, max_steps, config))(R, [False] * 16, L)


__all__ = ["MAX_CALL_DEPTH", "DEFAULT_MAX_STEPS", "E_MEMORY", "E_BUDGET", "E_STACK", "E_NEIGHBOUR", "E_BARRIER",
           "step_limit_error", "stack_overflow_error", "barrier_ids_error", "store_error", "divergence_error",
           "fault_error", "written_unsigned", "replay_access"]
