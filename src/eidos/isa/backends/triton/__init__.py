"""The Triton backend: Atlas ISA programs as generated Triton kernels (PTX on an NVIDIA GPU, Triton's
interpreter on the CPU when TRITON_INTERPRET=1).

How a program runs (decided once per program; explain() prints it with the generated source):
- array: collectives only, or collectives with register code that is the same in every thread
  (straight-line, no thread-varying Special, no shared memory): each element-wise chain or reduction
  is one generated kernel (arrays.py), a reduction right after the chain that wrote or read its
  range is fused into that chain's kernel; extension instructions run extensions.py's kernels; the
  uniform register code runs once on the host with the reference's semantics (its loads and stores
  move a few bytes of device memory).
- threads: per-thread register code: one thread kernel (compile.py); collectives among it run between
  launches of that kernel (the CPU backend's rounds), through this module's array and extension
  routes, once for the grid with every thread's registers at hand.
"""

from __future__ import annotations

import functools
import inspect
import struct
from dataclasses import dataclass, field, fields, replace

from eidos.errors import BackendError, UnsupportedError

from ... import instructions as I
from ...address import CLASS_BYTES, NUM_PREDICATES, NUM_REGISTERS, Address, Register, Space, Special
from ...codegen.rows import ThreadView
from ...faults import DEFAULT_MAX_STEPS, store_error
from ...launch import ExecutionParams, LaunchConfig
from ...program import Program
from ...target import Target
from . import arrays

_VARYING = {Special.GLOBAL_ID, Special.THREAD_INDEX, Special.BLOCK_INDEX, Special.THREAD_X, Special.THREAD_Y,
            Special.THREAD_Z, Special.BLOCK_X, Special.BLOCK_Y, Special.BLOCK_Z}
_NOT_UNIFORM = (I.BRA, I.CALL, I.RET, I.LOOP, I.EXIT, I.BarSync, I.LDS, I.STS, I.NBRLoad, I.NBRStore, I.ResAccum,
                I.PhaseRead, I.PhaseWrite)
_MEMORY = (I.LDG, I.STG, I.PoolLoad, I.PoolStore)


def unavailable_reason() -> str | None:
    """None when this backend can run here; else why not and what to install or set."""
    from .device_memory import default_device

    try:
        default_device()
    except Exception as e:
        return str(e)
    return None


def _compile():
    """The register-program compiler (compile.py), imported on first use: it loads Triton's language."""
    from . import compile

    return compile


def _extensions():
    """The extension kernels (extensions.py), imported on first use."""
    from . import extensions

    return extensions


def varying_reason(ins) -> str | None:
    """Why instruction `ins` may differ between threads (None: every thread does the same)."""
    if isinstance(ins, _NOT_UNIFORM):
        return f"{ins.name} is per-thread control flow, shared memory or class state"
    if isinstance(ins, I.MOV) and isinstance(ins.src, Special) and ins.src in _VARYING:
        return f"it reads {ins.src}, which differs between threads"
    if any(a.space is Space.SHARED for _, a in ins.addresses()):
        return "it addresses shared memory"
    return None


# ---- the steps of a plan ---------------------------------------------------------------------------

class Run:
    """One launch's state: the uniform register file (as the reference's thread holds it) and predicates.

    A reduction's result stays on the device until something on the host reads it (`pending`:
    register -> (one-element tensor, type)): a store of it to memory is a device copy, so map+sum+STG
    runs without waiting for the GPU, as torch does; a result nobody reads is never fetched."""

    __slots__ = ("R", "P", "config", "pending")

    def __init__(self, params: ExecutionParams) -> None:
        R = [0] * NUM_REGISTERS
        for k, v in params.registers.items():
            if not 0 <= int(k) < NUM_REGISTERS:
                raise BackendError(f"ExecutionParams.registers: register r{k} out of range r0..r{NUM_REGISTERS - 1}")
            R[int(k)] = v
        self.R, self.P, self.config = R, [False] * NUM_PREDICATES, params.config
        self.pending: dict = {}

    def settle(self, registers=None) -> None:
        """Fetch pending results into R (all, or those among `registers`' indices): a device sync."""
        for r in list(self.pending) if registers is None else set(registers) & self.pending.keys():
            tensor, ty = self.pending.pop(r)
            self.R[r] = arrays.register_value(tensor, ty)


def resolve(ins, index: int, memory, threads):
    """ins with every register-held address replaced by the static address its pointer names in
    `threads` (objects with .R), checked with the reference's messages (one pointer for every thread)."""
    def static(addr):
        if not isinstance(addr, Address) or addr.space is not Space.REGISTER:
            return addr  # a static address, or a scalar operand (a Register)
        mem, off = arrays.Checks(memory, ins, index, threads)._locate(addr)
        if mem is memory.class_memory:
            return Address.cls(off // CLASS_BYTES, off % CLASS_BYTES)
        for space, table in ((Space.BUFFER, memory.buffers), (Space.POOL, memory.pools)):
            for h, t in table.items():
                if t is mem:
                    return Address(space, h, off)
        raise BackendError(f"instruction {index} ({ins.name}): {addr} names no live memory")

    changes = {}
    for f in fields(ins):
        v = getattr(ins, f.name)
        if isinstance(v, Address):
            changes[f.name] = static(v)
        elif isinstance(v, tuple) and v and isinstance(v[0], I.MapStep):
            changes[f.name] = tuple(I.MapStep(static(s.dst), s.operation, static(s.a),
                                              None if s.b is None else static(s.b)) for s in v)
    return replace(ins, **changes)


@dataclass
class KernelStep:
    """One generated array kernel (one instruction, or a chain and the reduction after it)."""
    group: tuple
    kernel: object = None
    dynamic: bool = False               # some address is register-held: resolved at each launch
    resolved: dict = field(default_factory=dict)
    dead: bool = False                  # the chain's pool is freed right after: store nothing

    def __post_init__(self) -> None:
        self.dynamic = any(a.space is Space.REGISTER for _, ins in self.group for _, a in ins.addresses())
        self.scalars = any(arrays.scalar_names(ins) for _, ins in self.group)
        if not self.dynamic:
            self.kernel = arrays.build(self.group, self.dead)

    @property
    def dst(self):
        ins = self.group[-1][1]
        return ins.dst if type(ins) in arrays.REDUCE_OF else None

    def __call__(self, backend, run: Run | None) -> None:
        memory = backend.memory
        if run is not None and run.pending and (self.dynamic or self.scalars):
            run.settle()  # addresses and scalar operands are read from registers on the host
        if self.dynamic:
            group = tuple((i, resolve(ins, i, memory, [ThreadView(run.R)])) for i, ins in self.group)
            k = self.resolved.get(group)
            if k is None:
                if len(self.resolved) > 64:
                    self.resolved.clear()
                k = self.resolved[group] = arrays.build(group, self.dead)
        else:
            k = self.kernel
        if k.memory is not memory or k.generation != memory.generation:
            arrays.bind(k, memory)
        if k.scalar_regs:
            arrays.set_scalars(k, arrays.uniform_scalars(k, run.R))
        result = arrays.launch(k, fetch=run is None)
        if self.dst is not None and run is not None:
            run.pending[self.dst.index] = (result, k.ty)

    def explain(self) -> tuple[str, str | None]:
        if self.dynamic:
            return ("one generated Triton kernel, addresses from registers resolved at each launch", None)
        return self.kernel.how, self.kernel.source


@dataclass
class ExtensionStep:
    index: int
    ins: object
    module: object

    def __call__(self, backend, run) -> None:
        ins = self.ins
        if run is not None and run.pending:   # only the registers it reads: a reduction's result it does not
            # read stays on the device, so a collective after map+sum+STG is queued without waiting for the GPU
            run.settle(r.index for r in ins.registers_read() if isinstance(r, Register))
        if run is not None and any(a.space is Space.REGISTER for _, a in ins.addresses()):
            ins = resolve(ins, self.index, backend.memory, [ThreadView(run.R)])
        if _takes_index(self.module.run):
            self.module.run(ins, backend.memory, index=self.index)
        else:
            self.module.run(ins, backend.memory)

    def explain(self):
        src = getattr(self.module, "source", None)
        return "extensions.py", (src(self.ins) if src is not None else None)


@functools.cache
def _takes_index(fn) -> bool:
    try:
        return "index" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


@dataclass
class PoolStep:
    ins: object
    zeroed: bool = True   # False: a scratch pool that only a dead chain's registers use (no memset)

    def __call__(self, backend, run) -> None:
        if isinstance(self.ins, I.PoolAlloc):
            backend.memory.allocate_pool(self.ins.size, self.ins.handle, zeroed=self.zeroed)
        else:
            backend.memory.free_pool(self.ins.handle)

    def explain(self):
        if not isinstance(self.ins, I.PoolAlloc):
            return "device free", None
        if self.zeroed:
            return "device allocation (torch caching allocator)", None
        return "device allocation, not zeroed: no kernel reads it before writing (torch caching allocator)", None


def _skip_zeroing(steps: list, dead: KernelStep, handle: int) -> None:
    """The tensor layer's map+sum: PoolAlloc(h), a chain into h fused with its sum, PoolFree(h). When
    the allocation is the last pool step before the chain, only register code that touches no memory
    lies between, and the kernel reads nothing of h, no byte of h is ever read: skip its memset."""
    if dead.dynamic or arrays.reads_pool(dead.kernel, handle):
        return
    for step in reversed(steps):
        if isinstance(step, PoolStep):
            if isinstance(step.ins, I.PoolAlloc) and step.ins.handle == handle:
                step.zeroed = False
            return
        if not isinstance(step, UniformStep) or any(
                isinstance(step.program.instructions[i], _MEMORY) for i in step.indices):
            return


@dataclass
class UniformStep:
    """Straight-line register code every thread runs alike: run once, on the host, by the reference's
    closures; loads and stores move a few bytes of device memory."""
    program: Program
    indices: list
    decoded: dict = field(default_factory=dict)   # LaunchConfig -> [(index, closure)]

    def code(self, config, max_steps):
        code = self.decoded.get(config)
        if code is None:
            from types import SimpleNamespace

            from ..reference.compile import Context, decoder
            ctx = Context(SimpleNamespace(class_memory=bytearray(0)), self.program, max_steps, config)
            ins = self.program.instructions
            code = [(i, True, _memory_step(ins[i], i)) if isinstance(ins[i], _MEMORY) else
                    (i, False, decoder(ins[i], i, ctx)) for i in self.indices]
            if len(self.decoded) > 16:
                self.decoded.clear()
            self.decoded[config] = code
        return code

    def __call__(self, backend, run) -> None:
        L = ThreadView(run.R)
        memory = backend.memory
        R, P = run.R, run.P
        for i, touches_memory, step in self.code(run.config, backend.max_steps):
            if run.pending and self._device_store(i, run, memory):
                continue
            try:
                if touches_memory:
                    step(R, memory)
                else:
                    step(R, P, L)
            except (TypeError, ValueError, OverflowError, ArithmeticError) as e:
                raise BackendError(f"instruction {i}: thread 0: {type(e).__name__}: {e} "
                                   "(does a register hold a value of another type?)") from e

    def _device_store(self, i: int, run: Run, memory) -> bool:
        """Instruction i with pending reduction results about: an STG/PoolStore of one to a static
        address is a device copy (True: done; validation made its type the reduction's); else fetch
        the pending registers it reads, and forget those it overwrites."""
        ins = self.program.instructions[i]
        if isinstance(ins, (I.STG, I.PoolStore)) and ins.src.index in run.pending:
            tensor, _ = run.pending[ins.src.index]
            addr = Address.pool(ins.pool, ins.offset) if isinstance(ins, I.PoolStore) else ins.dst
            if addr.space is not Space.REGISTER:
                what = f"instruction {i} ({ins.name})"
                mem, off = memory.locate(addr, what)
                memory.copy_in(mem, off, tensor.view(memory.torch.uint8), what)
                return True
        run.settle(r.index for r in ins.registers_read() if isinstance(r, Register))
        for r in ins.registers_written():
            if isinstance(r, Register):
                run.pending.pop(r.index, None)
        return False

    def explain(self):
        return "uniform register code: once, on the host (the reference's semantics)", None


def _memory_step(ins, i: int):
    """LDG/STG/PoolLoad/PoolStore of one thread-uniform value: the reference's codec and messages."""
    from ..reference.compile import codec

    load = isinstance(ins, (I.LDG, I.PoolLoad))
    ty = ins.ty
    if isinstance(ins, (I.PoolLoad, I.PoolStore)):
        addr = Address.pool(ins.pool, ins.offset)
    else:
        addr = ins.src if load else ins.dst
    reg = (ins.dst if load else ins.src).index
    n, ld, st = codec(ty)
    what = f"instruction {i} ({ins.name})"

    def where(R, memory):
        if addr.space is Space.REGISTER:
            ptr = R[addr.reg.index]
            if type(ptr) is not int or ptr < 0:
                raise BackendError(f"{what}: the address register holds {ptr!r}, not a pointer")
            return memory.locate_pointer(ptr, what)
        return memory.locate(addr, what)

    def step(R, memory):
        mem, off = where(R, memory)
        buf = bytearray(n)
        if load:
            memory.copy_out(mem, off, buf, what)
            R[reg] = ld(memoryview(buf), 0)
        else:
            try:
                st(buf, 0, R[reg])
            except (struct.error, OverflowError, TypeError, ValueError) as e:
                raise store_error(what, R[reg], ty, e) from None
            memory.copy_in(mem, off, buf, what)
    return step


@dataclass
class ThreadsStep:
    """Per-thread code as one thread kernel (compile.py); its collectives run between launches, here."""
    program: Program
    kernel: object

    def __call__(self, backend, run) -> None:
        run.settle()
        registers = {k: v for k, v in enumerate(run.R) if type(v) is not int or v != 0}
        self.kernel.launch(backend.memory, ExecutionParams(run.config, registers),
                           run_collective=backend.run_collective, max_steps=backend.max_steps)

    def explain(self):
        return "thread kernel (compile.py)", getattr(self.kernel, "source", None)


@dataclass
class Plan:
    """How one program runs here, decided once per program (by object and by Blake3 key)."""
    program: Program
    kind: str                  # "array" or "threads"
    why: str
    steps: list
    routes: list               # per instruction: where it goes
    fast: tuple | None = None  # array plans with no register state: just these kernels
    graphable: bool = False    # a run is device work alone: it may be captured as one CUDA graph
    communicates: bool = False  # it runs collectives: captured only where the device group allows it


def communicating(step) -> bool:
    """A collective (AllReduce, AllGather, ...) at static addresses: device work for the group's engine
    (NCCL), which may join a CUDA graph where the group says it can be captured."""
    return isinstance(step, ExtensionStep) and isinstance(step.ins, I.COMMUNICATING) and \
        not any(a.space is Space.REGISTER for _, a in step.ins.addresses())


def graphable(steps: list) -> bool:
    """Whether a run of these steps (from no registers: execute_program) is device work alone, the same
    every run, touching no memory that outlives the run but what the steps' kernels are bound to: each
    kernel's addresses static; scalar operands read before any reduction leaves a result pending (a
    pending result would be fetched, a sync); pools only scratch that no kernel reads or writes (the
    map+sum's dead chain) and freed in the run; uniform code only register arithmetic and stores of
    reduction results to static addresses (device copies); collectives at static addresses (they read
    no register, so a pending result stays on the device)."""
    reduced = set()
    for step in steps:
        if communicating(step):
            continue
        if isinstance(step, KernelStep):
            if step.dynamic or (step.scalars and reduced):
                return False
            if step.dst is not None:
                reduced.add(step.dst.index)
        elif isinstance(step, PoolStep):
            if isinstance(step.ins, I.PoolAlloc) and step.zeroed:
                return False
        elif isinstance(step, UniformStep):
            for i in step.indices:
                ins = step.program.instructions[i]
                stores = isinstance(ins, (I.STG, I.PoolStore))
                if isinstance(ins, _MEMORY) and not (stores and ins.src.index in reduced and (
                        isinstance(ins, I.PoolStore) or ins.dst.space is not Space.REGISTER)):
                    return False
                if not stores and any(isinstance(r, Register) and r.index in reduced for r in ins.registers_read()):
                    return False
        else:
            return False
    return any(isinstance(s, KernelStep) or communicating(s) for s in steps)


@dataclass
class Graph:
    """A program's run captured as one CUDA graph, valid while memory's allocations are those it was
    captured with (its generation); `runs`: the plain runs seen before capturing (two: compiled, bound)."""
    program: Program
    config: LaunchConfig
    generation: int = -1
    graph: object = None
    runs: int = 0


class TritonBackend(Target):
    """Runs Atlas ISA programs as generated Triton kernels on a CUDA device, or in Triton's interpreter
    on the CPU under TRITON_INTERPRET=1 (see the module doc). Memory lives on the device (device.py);
    `adopt(tensor)` makes a caller's tensor a buffer without a copy."""

    name = "triton"

    def __init__(self, device=None, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        super().__init__()
        from ...cache import ProgramCache
        from .device_memory import DeviceMemory

        self.memory = DeviceMemory(device)
        self.device = self.memory.device
        self.max_steps = int(max_steps)
        self.cache = ProgramCache(512, libraries=("triton", "torch"))
        self._plans: dict[int, tuple[Program, Plan]] = {}
        self._kernels: dict = {}  # collectives met inside thread kernels: (index, instruction) -> Kernel
        self.graphs = True        # repeated runs of a cached program as one CUDA graph (execute_program)
        self._graphs: dict[int, Graph] = {}

    # ---- what this backend can do ---------------------------------------------------------------
    def is_available(self) -> bool:
        return True  # constructing it checked torch, triton and the device

    def capabilities(self) -> dict:
        import torch
        import triton

        ext = _extensions()
        return {"device": str(self.device), "interpreter": not self.memory.cuda, "triton": triton.__version__,
                "torch": torch.__version__,
                "array_instructions": "generated Triton kernels (fused chains, fused map+reduce)",
                "register_programs": "compile.py",
                "extensions": sorted(c.__name__ for c in ext.EXTENSIONS),
                "extended_integers": "unsupported (no GPU integers wider than 64 bits)", "devices": 1}

    def adopt(self, tensor, *, pool: bool = False) -> int:
        """A caller's contiguous device tensor as a buffer (or pool) handle, sharing its memory."""
        return self.memory.adopt(tensor, pool=pool)

    def tensor(self, handle: int):
        """The uint8 device tensor behind a buffer or pool handle (0: class memory)."""
        return self.memory.tensor(handle)

    def synchronize(self) -> None:
        self.memory.synchronize()

    def accumulators(self) -> list[float]:
        return [float(x) for x in self.memory.accumulators.tolist()]

    def phases(self) -> list[int]:
        return [int(x) for x in self.memory.phases.tolist()]

    # ---- planning ---------------------------------------------------------------------------------
    def plan(self, program: Program) -> Plan:
        hit = self._plans.get(id(program))
        if hit is not None and hit[0] is program:
            return hit[1]
        if not isinstance(program, Program):
            raise BackendError(f"execute: expected a Program, got {type(program).__name__}")
        program.validate()
        plan = self.cache.get_or_compile(program, self._make_plan, "triton")
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[id(program)] = (program, plan)
        return plan

    def _make_plan(self, program: Program) -> Plan:
        ins = program.instructions
        varying = next(((i, r) for i in range(len(ins)) if not ins[i].collective and (r := varying_reason(ins[i]))),
                       None)
        if varying is not None or program.entry != 0:
            routes = [self.collective_route(i, x) + ", between thread-kernel launches" if x.collective
                      else "thread kernel (compile.py)" for i, x in enumerate(ins)]
            why = (f"instruction {varying[0]} ({ins[varying[0]].name}) differs between threads ({varying[1]})"
                   if varying is not None else "the program starts after instruction 0")
            if any(x.collective for x in ins):
                why += "; its collectives run once for the grid between launches (rounds)"
            return Plan(program, "threads", why, [ThreadsStep(program, _compile().compile_program(program))], routes)
        steps, routes = self._array_steps(program)
        fast = tuple(steps) if all(isinstance(s, KernelStep) and not s.dynamic and not s.scalars and s.dst is None
                                   for s in steps) else None
        return Plan(program, "array", "collectives, and register code that is the same in every thread",
                    steps, routes, fast=fast, graphable=graphable(steps),
                    communicates=any(isinstance(x, I.COMMUNICATING) for x in ins))

    def collective_route(self, i: int, x) -> str:
        """Where collective instruction i goes; UnsupportedError naming it where it has no Triton form."""
        if isinstance(x, arrays.HANDLES):
            return "arrays.py"
        if isinstance(x, (I.PoolAlloc, I.PoolFree)):
            return "device memory"
        if isinstance(x, I.COMMUNICATING):
            if self.memory.group is None:
                raise UnsupportedError(f"instruction {i} ({x.name}) needs a multi-device backend; the triton "
                                       "backend has one device (it is in no device group: eidos.isa.distributed)")
            return "extensions.py (the device group's call)"
        if type(x) not in _extensions().EXTENSIONS:
            raise UnsupportedError(f"instruction {i} ({x.name}) has no Triton form in extensions.py")
        return "extensions.py"

    def _array_steps(self, program: Program) -> tuple[list, list]:
        ins = program.instructions
        steps, routes, uniform = [], [], []

        def flush():
            if uniform:
                steps.append(UniformStep(program, list(uniform)))
                routes.extend(["uniform register code (host, once)"] * len(uniform))
                uniform.clear()

        k = 0
        while k < len(ins):
            x = ins[k]
            if not x.collective:
                uniform.append(k)
                k += 1
                continue
            flush()
            route = self.collective_route(k, x)
            if route == "arrays.py":
                if k + 1 < len(ins) and arrays.fusable_reduce(x, ins[k + 1]):
                    dead = k + 2 < len(ins) and arrays.dead_after(x, ins[k + 2])
                    step = KernelStep(((k, x), (k + 1, ins[k + 1])), dead=dead)
                    if dead:
                        _skip_zeroing(steps, step, ins[k + 2].handle)
                    steps.append(step)
                    routes += ["arrays.py: fused with the reduction after it" + (
                        " (its pool is freed next: nothing stored)" if dead else ""),
                        "arrays.py: fused into the chain before"]
                    k += 2
                    continue
                steps.append(KernelStep(((k, x),)))
            elif route == "device memory":
                steps.append(PoolStep(x))
            else:
                steps.append(ExtensionStep(k, x, _extensions()))
            routes.append(route)
            k += 1
        flush()
        return steps, routes

    def run_collective(self, ins, i: int, threads) -> None:
        """A collective met inside a thread kernel, once for the grid: `threads` hold every live thread's
        registers (.R); register-held addresses must agree between them (the reference's check)."""
        if isinstance(ins, (I.PoolAlloc, I.PoolFree)):
            PoolStep(ins)(self, None)
            return
        self.collective_route(i, ins)
        memory = self.memory
        if any(a.space is Space.REGISTER for _, a in ins.addresses()):
            ins = resolve(ins, i, memory, threads)
        if isinstance(ins, arrays.HANDLES):
            group = ((i, ins),)
            k = self._kernels.get(group)
            if k is None:
                if len(self._kernels) > 256:
                    self._kernels.clear()
                k = self._kernels[group] = arrays.build(group)
            arrays.bind(k, memory)
            if k.scalar_regs:
                arrays.set_scalars(k, arrays.scalars(k, memory, threads))
            value = arrays.launch(k)
            if value is not None:
                for L in threads:
                    L.R[ins.dst.index] = value
        else:
            ExtensionStep(i, ins, _extensions())(self, None)

    # ---- execution --------------------------------------------------------------------------------
    def execute_program(self, program, config: LaunchConfig) -> None:
        g = self._graphs.get(id(program))
        if g is not None and g.program is program and g.graph is not None and g.config == config \
                and g.generation == self.memory.generation:
            g.graph.replay()
            return
        if self.graphs and self.memory.cuda and type(config) is LaunchConfig and config.total_threads():
            if self._graphed(program, config):
                return
        hit = self._plans.get(id(program))
        if hit is not None and hit[0] is program and hit[1].fast is not None and type(config) is LaunchConfig:
            if config.total_threads():
                memory = self.memory
                for step in hit[1].fast:
                    k = step.kernel
                    if k.memory is not memory or k.generation != memory.generation:
                        arrays.bind(k, memory)
                    arrays.launch(k)
            return
        super().execute_program(program, config)

    def _graphed(self, program, config: LaunchConfig) -> bool:
        """A cached program's third run in a row with one config and unchanged memory is captured as a
        CUDA graph and replayed (True); its later runs replay it: one launch, no host work per kernel.
        Inputs are read where they are at each replay, so new data in the same buffers is seen. Its
        collectives are captured too where the device group can be (NCCL): every rank runs the same
        programs in the same order, so each captures at the same run, after two plain runs have made
        the group's communicators."""
        plan = self.plan(program)
        if not plan.graphable or (plan.communicates and not getattr(self.memory.group, "capturable", False)):
            return False
        g = self._graphs.get(id(program))
        if g is None or g.program is not program or g.config != config or g.generation != self.memory.generation:
            if len(self._graphs) > 256:
                self._graphs.clear()
            g = self._graphs[id(program)] = Graph(program, config)
        g.runs += 1
        if g.runs < 3:
            super().execute_program(program, config)
            g.generation = self.memory.generation
            return True
        torch = self.memory.torch
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            super().execute_program(program, config)
        g.graph, g.generation = graph, self.memory.generation
        graph.replay()  # capturing recorded the run; this does it
        return True

    def execute_program_with_params(self, program, params: ExecutionParams) -> None:
        self.check_params(params, program)
        plan = self.plan(program)
        if params.config.total_threads() == 0:
            return
        run = Run(params)
        for step in plan.steps:
            step(self, run)

    # ---- explain ----------------------------------------------------------------------------------
    def explain(self, program: Program) -> str:
        """The route of every instruction and the generated Triton source of each kernel."""
        plan = self.plan(program)
        lines = [f"triton backend on {self.device} ({'Triton interpreter' if not self.memory.cuda else 'CUDA'})",
                 f"program {program.digest()[:16]}: {len(program)} instructions",
                 f"runs: {plan.kind} ({plan.why})"]
        for i, (x, route) in enumerate(zip(program.instructions, plan.routes)):
            lines.append(f"  {i}: {x.name} -> {route}")
        for n, step in enumerate(plan.steps):
            how, src = step.explain()
            lines.append(f"step {n}: {how}")
            if src:
                lines += ["  " + line for line in src.rstrip().splitlines()]
        return "\n".join(lines)


__all__ = ["TritonBackend", "unavailable_reason"]
