"""The thread scheduler: runs every thread of the grid, honouring barriers and collectives.

A thread runs straight through its closures until it exits, reaches a BarSync, or reaches
a collective instruction. Threads run in GLOBAL_ID order; without collectives the blocks run
one after another (only one block's threads exist at a time), with them all threads together. A block's barrier opens when all its live threads wait at it; a
collective runs once when every live thread of the grid waits at it. Anything else is a
divergence error, reported with where the threads are.
"""

from __future__ import annotations

from eidos.errors import BackendError

from ...address import NUM_PREDICATES, NUM_REGISTERS, Special
from ...codegen.state import AT_BARRIER, AT_COLLECTIVE, EXITED, RUNNING
from ...faults import barrier_ids_error, divergence_error
from . import arrays
from .compile import SLICE, Context, decode


class Thread:
    """One thread's state. `ids` is (global_id, thread_index, block_index, tx, ty, tz, bx, by, bz)."""

    __slots__ = ("R", "P", "stack", "pc", "state", "wait", "ids", "shared", "budget", "left", "block")

    def __init__(self, registers, ids, shared, budget, block, entry) -> None:
        self.R = registers.copy()
        self.P = [False] * NUM_PREDICATES
        self.stack: list[int] = []
        self.pc = entry
        self.state = RUNNING
        self.wait = None
        self.ids = ids
        self.shared = shared
        self.budget = min(budget, SLICE)   # backward jumps left in this slice (compile._slice_spent)
        self.left = budget - self.budget
        self.block = block


def special_getter(key: Special, config):
    """thread -> the value of a Special register, for this launch."""
    (gx, gy, gz), (bx, by, bz) = config.grid, config.block
    per_block = bx * by * bz
    constant = {Special.LANE_COUNT: per_block * gx * gy * gz, Special.BLOCK_THREADS: per_block,
                Special.BLOCK_DIM_X: bx, Special.BLOCK_DIM_Y: by, Special.BLOCK_DIM_Z: bz,
                Special.GRID_DIM_X: gx, Special.GRID_DIM_Y: gy, Special.GRID_DIM_Z: gz}
    if key in constant:
        v = constant[key]
        return lambda L: v
    pos = [Special.GLOBAL_ID, Special.THREAD_INDEX, Special.BLOCK_INDEX, Special.THREAD_X, Special.THREAD_Y,
           Special.THREAD_Z, Special.BLOCK_X, Special.BLOCK_Y, Special.BLOCK_Z].index(key)
    return lambda L: L.ids[pos]


def _initial_registers(registers) -> list:
    init = [0] * NUM_REGISTERS
    for k, v in registers.items():
        if not 0 <= int(k) < NUM_REGISTERS:
            raise BackendError(f"ExecutionParams.registers: register r{k} out of range r0..r{NUM_REGISTERS - 1}")
        init[int(k)] = v
    return init


def _blocks(config, init, max_steps, entry):
    """Each block's threads in order, made only when asked for."""
    (gx, gy, gz), (bx, by, bz) = config.grid, config.block
    per_block = bx * by * bz
    b = 0
    for kz in range(gz):
        for ky in range(gy):
            for kx in range(gx):
                shared = memoryview(bytearray(config.shared_memory))
                base = b * per_block
                yield [Thread(init, (base + t, t, b, t % bx, (t // bx) % by, t // (bx * by), kx, ky, kz),
                            shared, max_steps, b, entry) for t in range(per_block)]
                b += 1


def _run_thread(L, code) -> None:
    R, P = L.R, L.P
    pc = L.pc
    L.state = RUNNING
    try:
        while pc >= 0:
            pc = code[pc](R, P, L)
    except (TypeError, ValueError, OverflowError, ArithmeticError) as e:
        # Only a register holding a value its type cannot have (a kernel argument, say) gets here.
        raise BackendError(f"instruction {pc}: thread {L.ids[0]}: {type(e).__name__}: {e} "
                           "(does a register hold a value of another type?)") from e


def _straight_collectives(program) -> bool:
    """True when every instruction is a collective with no per-thread operand: run each once, no threads."""
    for ins in program.instructions:
        if not ins.collective or ins.registers_read() or ins.registers_written():
            return False
    return program.entry == 0


def execute(program, params, memory, max_steps: int, decoded=None) -> None:
    """Run one launch. `decoded`, a dict the caller keeps per program, holds the closures
    between launches while the memory's allocations and the launch shape stay the same."""
    config = params.config
    if config.total_threads() == 0:
        return
    if _straight_collectives(program) and not params.registers:
        for i, ins in enumerate(program.instructions):
            arrays.run(ins, i, (), memory)
        return
    key = (memory.generation, config, max_steps)
    if decoded is not None and decoded.get("key") == key:
        code = decoded["code"]
    else:
        code = decode(program, Context(memory, program, max_steps, config))
        if decoded is not None:
            decoded.update(key=key, code=code)
    blocks = _blocks(config, _initial_registers(params.registers), max_steps, program.entry)
    if any(ins.collective for ins in program.instructions):
        _schedule(list(blocks), code, program.instructions, memory)
    else:  # blocks cannot wait on each other: one at a time, so only one block's threads exist at once
        for block in blocks:
            _schedule([block], code, program.instructions, memory)


def _schedule(blocks, code, instructions, memory) -> None:
    """Run these blocks' threads to the end, opening barriers and running collectives as they fill."""
    runnable = [L for block in blocks for L in block]
    while True:
        for L in runnable:
            _run_thread(L, code)
        blocks = [[L for L in block if L.state != EXITED] for block in blocks]
        blocks = [b for b in blocks if b]
        if not blocks:
            return
        runnable = []
        for block in blocks:
            if all(L.state == AT_BARRIER for L in block):
                ids = {L.wait for L in block}
                if len(ids) > 1:
                    raise barrier_ids_error(block[0].block, ids)
                runnable += block
        if runnable:
            continue
        live = [L for block in blocks for L in block]
        waits = {(L.state, L.pc) for L in live}
        if len(waits) == 1 and live[0].state == AT_COLLECTIVE:
            i = live[0].pc
            arrays.run(instructions[i], i, live, memory)
            for L in live:
                L.pc = i + 1
            runnable = live
            continue
        raise divergence_error(waits, instructions, AT_BARRIER)
