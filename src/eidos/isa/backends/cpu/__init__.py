"""The compiled CPU backend: whole programs compiled once to native code with numba, array
instructions as vectorized kernels, BLAS for GEMMs; the reference interpreter's exact path for
what has no native form (integers wider than 64 bits) or when numba is absent.

How a program runs (explain() says which, and why):
- array: only collectives with constant addresses -> one bound kernel per instruction (arrays.py).
- threads: per-thread code without barriers, shared memory or collectives -> one numba function
  runs every thread start to end; prange over threads when compile.Accesses proves the launch's threads
  never touch each other's stored bytes, else in thread order (the reference's order).
- rounds: barriers, shared memory or collectives -> numba runs each block's threads in lockstep
  phases split at barriers (blocks in parallel when hazard-free); Python runs each collective
  once for the grid between phases.
- interpreted: the reference interpreter (extended integers, or no numba).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eidos.errors import BackendError

from ...codegen import s64, thread_views
from ...codegen.state import AT_BARRIER, AT_COLLECTIVE, EXITED, RUNNING
from ...faults import (
    DEFAULT_MAX_STEPS,
    E_BARRIER,
    MAX_CALL_DEPTH,
    barrier_ids_error,
    divergence_error,
    fault_error,
    replay_access,
)
from ...launch import ExecutionParams, LaunchConfig
from ...program import Program
from ...target import Target
from . import arrays
from .compile import NotCompilable, default_cache_dir, extended_type, shape_of

THREADS_PAR_MIN = 4096  # threads; fewer run on one core (starting the pool costs more than they take)
_NUMBA: list = []      # [module or None, reason]


def _import_numba():
    return importlib.import_module("numba")


def numba_status() -> tuple[object | None, str]:
    """(the numba module or None, why not). Imported on first need, never at `import eidos.isa`."""
    if not _NUMBA:
        try:
            _NUMBA[:] = [_import_numba(), ""]
        except Exception as e:  # absent or broken: the backend still runs, without compiling
            _NUMBA[:] = [None, f"numba is not importable ({type(e).__name__}: {e}); pip install 'eidos[cpu]'"]
    return _NUMBA[0], _NUMBA[1]


@dataclass
class Plan:
    """How one program runs here, decided once per Program object."""
    program: Program
    kind: str                   # "array", "threads", "rounds" or "interpreted"
    why: str
    steps: list | None = None   # array: one bound kernel per instruction
    compiled: object = None     # threads/rounds: the generated module
    gen: object = None
    accesses: object = None
    collectives: dict | None = None


_HOW = {"array": "vectorized kernels", "threads": "compiled to native code (numba)",
        "rounds": "compiled to native code (numba)", "interpreted": "by the reference interpreter"}


class CpuBackend(Target):
    """Runs Atlas ISA programs as native code. cache_dir holds the generated modules and numba's
    compiled code, so a second process loads instead of compiling (default: $EIDOS_CACHE_DIR or
    ~/.cache/eidos, under isa-cpu/). use_numba=False forces the no-numba paths."""

    name = "cpu"

    def __init__(self, max_steps: int = DEFAULT_MAX_STEPS, cache_dir: str | os.PathLike | None = None,
                 use_numba: bool = True) -> None:
        super().__init__()
        from ...cache import ProgramCache

        self.max_steps = int(max_steps)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._use_numba = bool(use_numba)
        self._numba: tuple | None = None
        self.cache = ProgramCache(512, libraries=("numba",))
        self._plans: dict[int, Plan] = {}

    @property
    def numba(self):
        """The numba module, imported on first need (a compile, explain, capabilities); None when absent."""
        if self._numba is None:
            self._numba = numba_status() if self._use_numba else (None, "numba disabled (CpuBackend(use_numba=False))")
        return self._numba[0]

    @property
    def numba_reason(self) -> str:
        _ = self.numba  # imported on first need
        return self._numba[1]

    # ---- what this backend can do --------------------------------------------------------------
    def is_available(self) -> bool:
        """Always: without numba it still runs every program (vectorized NumPy and the interpreter)."""
        return True

    def capabilities(self) -> dict:
        nb = self.numba
        threads = nb.config.NUMBA_NUM_THREADS if nb is not None else 1
        return {"compiled": nb is not None, "numba": getattr(nb, "__version__", None),
                "reason": self.numba_reason or None, "threads": threads, "cache_dir": str(self.cache_dir),
                "register_programs": "compiled (numba)" if nb is not None else "interpreted (reference)",
                "array_instructions": "numba loops, BLAS for GEMM" if nb is not None else "NumPy",
                "extended_integers": "interpreted (reference, exact)", "devices": 1}

    # ---- planning ---------------------------------------------------------------------------------
    def plan(self, program: Program) -> Plan:
        """The Plan for a program (compiling it on first use), cached per Program object."""
        plan = self._plans.get(id(program))
        if plan is not None and plan.program is program:
            return plan
        if not isinstance(program, Program):
            raise BackendError(f"execute: expected a Program, got {type(program).__name__}")
        program.validate()
        plan = self._make_plan(program)
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[id(program)] = plan
        return plan

    def _make_plan(self, program: Program) -> Plan:
        ext = extended_type(program)
        shape = shape_of(program)
        if shape == "array":
            steps = [arrays.bind(ins, i, self) for i, ins in enumerate(program.instructions)]
            return Plan(program, "array", "only array instructions with constant addresses", steps=steps)
        if ext is not None:
            return Plan(program, "interpreted", f"instruction {ext[0]} uses {ext[1].name}: integers wider than "
                        "64 bits have no native type, so the exact reference interpreter runs the program")
        if self.numba is None:
            return Plan(program, "interpreted", self.numba_reason)
        from . import compile as C
        from .compile import Accesses

        def build(p):
            key = self.cache.key(p, "cpu")
            source, gen = C.generate(p, p.digest())
            return C.load_module(source, f"prog_{key[:40]}", self.cache_dir), gen

        try:
            module, gen = self.cache.get_or_compile(program, build, "cpu")
        except NotCompilable as e:
            return Plan(program, "interpreted", f"not compilable: {e}")
        collectives = {i: arrays.bind(ins, i, self) for i, ins in enumerate(program.instructions) if ins.collective}
        arrays.fuse_sums(program, collectives, self)
        why = ("per-thread code without barriers, shared memory or collectives: each thread runs start to end"
               if shape == "threads" else
               "barriers, shared memory or collectives: threads run in lockstep phases split at barriers, "
               "collectives once per launch between phases")
        return Plan(program, shape, why, compiled=module, gen=gen, accesses=Accesses(program),
                    collectives=collectives)

    # ---- execution --------------------------------------------------------------------------------
    def execute_program(self, program, config: LaunchConfig) -> None:
        plan = self._plans.get(id(program))
        if plan is not None and plan.program is program and plan.kind == "array" and type(config) is LaunchConfig:
            if config.total_threads():
                memory = self.memory
                for step in plan.steps:
                    step(memory)
            return
        super().execute_program(program, config)

    def execute_program_with_params(self, program, params: ExecutionParams) -> None:
        self.check_params(params, program)
        plan = self.plan(program)
        config = params.config
        if config.total_threads() == 0:
            return
        for k in params.registers:
            if not 0 <= int(k) < 256:
                raise BackendError(f"ExecutionParams.registers: register r{k} out of range r0..r255")
        if plan.kind == "array":
            registers = params.registers
            for step in plan.steps:
                step(self.memory, (), registers)
        elif plan.kind == "interpreted":
            from ..reference.runtime import execute

            execute(program, params, self.memory, self.max_steps)
        elif plan.kind == "threads":
            self._run_threads(plan, params)
        else:
            self._run_rounds(plan, params)

    # ---- compiled launches ----------------------------------------------------------------------
    def _tables(self):
        mem = self.memory
        hmax = max(max(mem.buffers, default=0), max(mem.pools, default=0))
        tbb = np.zeros(hmax + 1, dtype=np.int64)
        tbs = np.full(hmax + 1, -1, dtype=np.int64)
        tbb[0], tbs[0] = mem.class_memory.ctypes.data, mem.class_memory.size
        for table in (mem.buffers, mem.pools):
            for h, a in table.items():
                tbb[h], tbs[h] = a.ctypes.data, a.size
        return tbb, tbs

    def _sites(self, gen, tbb, tbs) -> np.ndarray:
        from ...address import CLASS_BYTES, Space

        mem = self.memory
        out = np.full(max(1, len(gen.sites)), -1, dtype=np.int64)
        for j, s in enumerate(gen.sites):
            if s.space is Space.CLASS:
                h, off = 0, s.handle * CLASS_BYTES + s.offset
            else:
                h, off = s.handle, s.offset
                if (mem.buffers if s.space is Space.BUFFER else mem.pools).get(h) is None:
                    continue
            if 0 <= off and off + s.size <= tbs[h]:
                out[j] = tbb[h] + off
        return out

    @staticmethod
    def _registers(params) -> tuple[np.ndarray, np.ndarray]:
        ini = np.zeros(256, dtype=np.int64)
        inf = np.zeros(256, dtype=np.float64)
        for k, v in params.registers.items():
            if isinstance(v, (float, np.floating)):
                inf[int(k)] = float(v)
            else:
                ini[int(k)] = s64(v)
                inf[int(k)] = float(v)
        return ini, inf

    @staticmethod
    def _cfg(config) -> np.ndarray:
        (gx, gy, gz), (bx, by, bz) = config.grid, config.block
        return np.array([config.total_threads(), bx * by * bz, bx, by, bz, gx, gy, gz], dtype=np.int64)

    def parallel_reason(self, plan: Plan, params: ExecutionParams) -> str | None:
        """None when this launch may run threads (or blocks) in parallel; else why not."""
        if self.numba is None or self.numba.config.NUMBA_NUM_THREADS < 2:
            return "one numba thread"
        config = params.config
        if plan.kind == "threads" and config.total_threads() < THREADS_PAR_MIN:
            return f"{config.total_threads()} threads (< {THREADS_PAR_MIN}: one core is faster)"
        if plan.kind == "rounds" and config.num_blocks() < 2:
            return "one block"
        return plan.accesses.check(dict(params.registers), config)

    def _run_threads(self, plan: Plan, params: ExecutionParams) -> None:
        mod, gen = plan.compiled, plan.gen
        config = params.config
        tbb, tbs = self._tables()
        cst = self._sites(gen, tbb, tbs)
        ini, inf = self._registers(params)
        err = np.zeros(4, dtype=np.int64)
        mem = self.memory
        fn = mod.run_par if self.parallel_reason(plan, params) is None else mod.run_seq
        fn(self._cfg(config), ini, inf, tbb, tbs, len(tbb), cst, mem.accumulators, mem.phases, err, self.max_steps)
        if err[0]:
            self._raise(plan, params, err, None)

    def _run_rounds(self, plan: Plan, params: ExecutionParams) -> None:
        mod, gen = plan.compiled, plan.gen
        program, config = plan.program, params.config
        n, bt = config.total_threads(), config.block_threads()
        nb = n // bt
        slot = gen.slot
        ini, inf = self._registers(params)
        regs = sorted(slot, key=slot.get)
        RI = np.tile(ini[regs] if regs else np.zeros(0, np.int64), (n, 1)).reshape(n, max(1, len(regs)))
        RF = np.tile(inf[regs] if regs else np.zeros(0), (n, 1)).reshape(n, max(1, len(regs)))
        PR = np.zeros((n, 16), dtype=np.bool_)
        PCS = np.full(n, gen.entry, dtype=np.int64)
        STATE = np.full(n, RUNNING, dtype=np.int64)
        WAIT = np.zeros(n, dtype=np.int64)
        BUD = np.full(n, self.max_steps, dtype=np.int64)
        STK = np.zeros((n, MAX_CALL_DEPTH) if gen.uses_call else (1, 1), dtype=np.int64)
        SPS = np.zeros(n, dtype=np.int64)
        RUN = np.ones(nb, dtype=np.bool_)
        SHM = np.zeros((nb, config.shared_memory), dtype=np.uint8)
        err = np.zeros(4, dtype=np.int64)
        mem = self.memory
        fn = mod.rounds_par if self.parallel_reason(plan, params) is None else mod.rounds_seq
        starts = gen.blocks.starts + [len(program)]
        while True:
            tbb, tbs = self._tables()
            cst = self._sites(gen, tbb, tbs)
            fn(self._cfg(config), RI, RF, PR, PCS, STATE, WAIT, BUD, STK, SPS, RUN, SHM, tbb, tbs, len(tbb), cst,
               mem.accumulators, mem.phases, err)
            if err[0]:
                self._raise(plan, params, err, WAIT)
            live = np.flatnonzero(STATE != EXITED)
            if live.size == 0:
                return
            st, pcs = STATE[live], PCS[live]
            if (st == AT_COLLECTIVE).all() and (pcs == pcs[0]).all():
                i = starts[int(pcs[0])]
                plan.collectives[i](mem, thread_views(RI, RF, live, slot, slot))
                STATE[live] = RUNNING
                PCS[live] = gen.blocks.of[i + 1]
                RUN[:] = False
                RUN[np.unique(live // bt)] = True
                continue
            waits = {(int(s), starts[int(p)]) for s, p in zip(st, pcs)}
            raise divergence_error(waits, program.instructions, AT_BARRIER)

    def _raise(self, plan: Plan, params: ExecutionParams, err, WAIT):
        code, i, thread, value = (int(x) for x in err)
        if code == E_BARRIER:
            bt = params.config.block_threads()
            raise barrier_ids_error(i, {int(w) for w in WAIT[i * bt:(i + 1) * bt]})
        raise fault_error(plan.program, code, i, thread, lambda: replay_access(
            plan.program, i, value, self.memory, params.config, self.max_steps))

    # ---- explain ---------------------------------------------------------------------------------
    def explain(self, program: Program, config: LaunchConfig | ExecutionParams | None = None) -> str:
        """How this backend will run `program` (and, given a launch, whether its threads run in parallel)."""
        plan = self.plan(program)
        nb = self.numba
        lines = [f"cpu backend: {'numba ' + nb.__version__ + ' (LLVM; prange over ' + str(nb.config.NUMBA_NUM_THREADS) + ' threads)' if nb is not None else 'no numba: ' + self.numba_reason}",
                 f"program {program.digest()[:16]}: {len(program)} instructions",
                 f"runs: {plan.kind}, {_HOW[plan.kind]} ({plan.why})"]
        if plan.kind == "array":
            for i, step in enumerate(plan.steps):
                how = step.how or self._predict(step)
                lines.append(f"  {i}: {program.instructions[i].name} -> {how}")
        elif plan.kind in ("threads", "rounds"):
            lines.append(f"  compiled once to native code: {len(plan.gen.blocks.starts)} basic blocks, "
                         f"{len(plan.gen.slot)} registers as machine locals; cached in {self.cache_dir}")
            for i, step in (plan.collectives or {}).items():
                lines.append(f"  {i}: {program.instructions[i].name} (collective) -> {step.how or self._predict(step)}")
            if config is not None:
                params = config if isinstance(config, ExecutionParams) else ExecutionParams(config)
                reason = self.parallel_reason(plan, params)
                unit = "threads" if plan.kind == "threads" else "blocks"
                lines.append(f"  this launch: {unit} in parallel (prange)" if reason is None else
                             f"  this launch: {unit} in order ({reason})")
            else:
                unit = "threads" if plan.kind == "threads" else "blocks (threads within a block in order)"
                lines.append(f"  {unit} in parallel (prange) when a launch's addresses prove no thread touches bytes "
                             "another stores, else in thread order")
        return "\n".join(lines)

    def _predict(self, step) -> str:
        if isinstance(step, arrays.MapStep):
            if self.numba is not None and step.ty.name not in ("F16", "BF16"):
                par = " in parallel (prange)" if step.count >= arrays.PAR_MIN else ""
                if len(step.steps) == 1 and not step.scalars:
                    return "numba loop" + par
                if step.count < arrays.FUSE_MIN:
                    return f"{len(step.steps)} numba loops, one a step (short: fusing would not pay for its compile)"
                scal = f", {len(step.scalars)} scalar operand(s) as arguments" if step.scalars else ""
                return f"one fused numba loop over {len(step.steps)} step(s)" + par + scal
            return "NumPy"
        return step.how


__all__ = ["CpuBackend"]
