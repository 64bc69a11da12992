"""What the service runs: one fragment of a client's work, on the service's own engines.

A fragment is JSON (never pickle) and names no code: a plan (its functions resolve only to what the
service allows), ISA operations on the session's kernel target (programs are validated data), or a
tensor graph (eidos.remote.tensors: a closed vocabulary of operations). Each runner returns the
entries it made; they stay in the session's store until the client fetches or releases them.
Cancellation is cooperative: between batches of a plan, between ISA operations, and inside the
reference interpreter's loops (eidos.isa.cancel); a compiled kernel already launched runs to its end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from eidos.errors import BackendUnavailable, EidosError, ExecutionError, PlanError
from eidos.isa import cancel as isa_cancel

from .protocol import field
from .store import Entry, Session

MAX_PROGRAMS = 256   # compiled programs a session keeps, by key, so a repeated run sends only the key


def run(fragment: dict, session: Session, config, cancelled: threading.Event) -> list[Entry]:
    kind = field(fragment, "kind", str, "fragment")
    runner = RUNNERS.get(kind)
    if runner is None:
        raise PlanError(f"fragment kind {kind!r} is not one this service runs: {', '.join(RUNNERS)}")
    own = {k: v for k, v in fragment.items() if k != "id"}     # "id" is every fragment's, read by the service
    with isa_cancel.scope(cancelled):
        return runner(own, session, config, cancelled)


# ---- plans ------------------------------------------------------------------------------------------

def run_plan(fragment: dict, session: Session, config, cancelled: threading.Event) -> list[Entry]:
    from eidos.hal import planner, runner
    from eidos.hal.trust import Trust
    from eidos.ir.serialize import loads

    text = field(fragment, "plan", str, "plan fragment")
    plan = _bind(loads(text, resolve=Trust.of(config.trusted_modules).resolve), session, config)
    batches = []
    with planner.without("remote"):
        for batch in runner.stream(plan):
            isa_cancel.check("the plan")
            batches.append(batch)
    table = pa.Table.from_batches(batches, schema=plan.schema.to_arrow()) if batches else \
        plan.schema.to_arrow().empty_table()
    return [session.store.put("table", table, table.nbytes, rows=table.num_rows)]


def _bind(plan, session: Session, config):
    """The plan with each table it names on this service read from the session, and every other
    source checked against what the service allows (a plan from the network reads no file and no
    database the operator did not open to it)."""
    from eidos.ir import nodes as N
    from eidos.ir import sources as S
    from eidos.ir.rewrite import map_inputs

    def bind(node):
        if isinstance(node, N.Scan):
            return N.Scan(_source(node.source), node.columns)
        return map_inputs(node, bind)

    def _source(source):
        if type(source).__name__ == "RemoteSource":
            entry = session.store.input(source.handle, wait=config.input_wait)
            if entry.kind != "table":
                raise PlanError(f"the plan reads handle {source.handle} as a table, but it holds a {entry.kind}")
            return S.ArrowSource.of(entry.value, source.schema, kind="remote")
        if isinstance(source, S.ArrowSource):
            return source
        if isinstance(source, S.FileSource):   # parquet, CSV, NDJSON, IPC
            for path in source.paths:
                _allowed_path(str(path), config.allowed_paths)
            return source
        if isinstance(source, S.SqlSource):
            if source.uri not in config.allowed_databases:
                raise PlanError(f"the plan reads the database {source.describe()}, which this service does not "
                                "open to remote plans (start it with --allow-database URI)")
            return source
        raise PlanError(f"the plan reads {source.describe()}, which this service does not read for remote plans")

    return bind(plan)


def _allowed_path(path: str, roots: tuple[str, ...]) -> None:
    if "://" in path:
        raise PlanError(f"the plan reads {path!r}; this service reads only local files under its allowed folders")
    resolved = Path(path).resolve()
    if not any(resolved.is_relative_to(Path(root).resolve()) for root in roots):
        where = ", ".join(roots) if roots else "none: start it with --allow-path FOLDER"
        raise PlanError(f"the plan reads the file {path!r}, outside the folders this service opens to remote "
                        f"plans ({where})")


# ---- ISA operations -----------------------------------------------------------------------------------

def run_isa(fragment: dict, session: Session, config, cancelled: threading.Event) -> list[Entry]:
    """`fragment["ops"]` in order on one of the session's kernel targets: allocate, write (from a buffer sent
    on the data channel), execute, read (into a new result), free, state, close. Memory is named by `space`
    ("buffer", default; "pool"; "class") and handles are the target's own, so a program that names them runs
    unchanged. Besides the entries `read` keeps, `allocate`, `execute` and `state` answer with an outcome
    (id 0, nothing kept): the handle, the program's key, the class accumulators and phases.

    `target` names which of the service's kernel targets, `instance` which copy of it (each its own memory,
    handles from 1, as a new target object has): a client's target object is one instance."""
    ops = field(fragment, "ops", list, "isa fragment")
    target = _target(session, config, fragment)
    made: list[Entry] = []
    for i, op in enumerate(ops):
        isa_cancel.check("the ISA operations")
        at = f"isa fragment ops[{i}]"
        if not isinstance(op, dict):
            raise PlanError(f"{at}: must be an object, got {type(op).__name__}")
        name = field(op, "op", str, at)
        handler = _ISA_OPS.get(name)
        if handler is None:
            raise PlanError(f"{at}: unknown op {name!r}; ops are: {', '.join(_ISA_OPS)}")
        entry = handler(op, target, session, config, at)
        if entry is not None:
            made.append(entry)
    return made


MAX_INSTANCES = 64   # kernel-target instances one session may hold at once


def _target(session: Session, config, fragment: dict):
    from eidos.isa import registry

    name = field(fragment, "target", str, "isa fragment", default=config.isa_target)
    if name not in config.isa_targets:
        raise PlanError(f"kernel target {name!r} is not offered by this service; it offers: "
                        f"{', '.join(config.isa_targets)}")
    instance = field(fragment, "instance", str, "isa fragment", default="")
    if len(instance) > 64:
        raise PlanError(f"isa fragment: instance names are at most 64 characters, got {len(instance)}")
    targets = session.targets
    key = (name, instance)
    if key not in targets:
        if len(targets) >= MAX_INSTANCES:
            raise PlanError(f"this session already holds {MAX_INSTANCES} kernel-target instances; close one "
                            "(op 'close') before making another")
        targets[key] = registry.create(name)
    return targets[key]


def _int(op: dict, name: str, at: str, *, low: int = 0) -> int:
    value = field(op, name, int, at)
    if value < low:
        raise PlanError(f"{at}: {name} must be >= {low}, got {value}")
    return value


def _space(op: dict, at: str, spaces: tuple[str, ...] = ("buffer", "pool", "class")) -> str:
    space = field(op, "space", str, at, default="buffer")
    if space not in spaces:
        raise PlanError(f"{at}: space {space!r} is not one of {', '.join(spaces)}")
    return space


def _allocate(op, target, session, config, at):
    from eidos.isa.types import Type

    space, nbytes = _space(op, at, ("buffer", "pool")), _int(op, "bytes", at)
    if nbytes > config.max_buffer:
        raise PlanError(f"{at}: a {space} of {nbytes:,} bytes is over this service's limit of {config.max_buffer:,}")
    if space == "pool":
        return Entry(0, "target_pool", 0, meta={"target_pool": target.allocate_pool(nbytes)})
    ty = field(op, "type", (str, type(None)), at, default=None)
    handle = target.allocate_buffer(nbytes, Type.parse(ty) if ty else None)
    return Entry(0, "target_buffer", 0, meta={"target_buffer": handle})      # an outcome, nothing kept


def _write(op, target, session, config, at):
    entry = session.store.input(_int(op, "data", at, low=1), wait=config.input_wait)
    if entry.block is None:
        raise PlanError(f"{at}: handle {entry.id} holds a {entry.kind}, not bytes sent on the data channel")
    space, offset, data = _space(op, at), field(op, "offset", int, at), entry.block.view
    if space == "buffer":
        target.copy_to_buffer(_int(op, "buffer", at, low=1), data, offset)
    elif space == "pool":
        target.copy_to_pool(_int(op, "buffer", at, low=1), offset, data)
    else:
        target.copy_to_class(_int(op, "class", at), offset, data)
    return None


def _read(op, target, session, config, at):
    space, nbytes, offset = _space(op, at), _int(op, "bytes", at), field(op, "offset", int, at)
    block = session.store.pool.allocate(nbytes, session.id)
    try:
        if space == "buffer":
            target.copy_from_buffer(_int(op, "buffer", at, low=1), block.view, offset)
        elif space == "pool":
            target.copy_from_pool(_int(op, "buffer", at, low=1), offset, block.view)
        else:
            target.copy_from_class(_int(op, "class", at), offset, block.view)
    except BaseException:
        session.store.pool.free(block)
        raise
    return session.store.put("buffer", None, nbytes, block=block)


def _free(op, target, session, config, at):
    if _space(op, at, ("buffer", "pool")) == "pool":
        target.free_pool(_int(op, "buffer", at, low=1))
    else:
        target.free_buffer(_int(op, "buffer", at, low=1))
    return None


def _describe(op, target, session, config, at):
    """A buffer's or pool's size (and a buffer's element type) (an outcome; nothing kept)."""
    handle = _int(op, "buffer", at, low=1)
    if _space(op, at, ("buffer", "pool")) == "pool":
        return Entry(0, "described", 0, meta={"bytes": target.pool_size(handle), "type": None})
    ty = target.buffer_type(handle)
    return Entry(0, "described", 0, meta={"bytes": target.buffer_size(handle), "type": ty.name if ty else None})


def _state(op, target, session, config, at):
    """The class accumulators and phases, which a program may change (an outcome; nothing kept)."""
    return Entry(0, "state", 0, meta={"accumulators": [_number(v) for v in target.accumulators()],
                                      "phases": target.phases()})


def _close(op, target, session, config, at):
    """Drop this kernel-target instance and all its memory (a client's target object was collected)."""
    for key, kept in list(session.targets.items()):
        if kept is target:
            del session.targets[key]
    return None


def _number(v: float):
    """A float as JSON carries it: non-finite values as the strings Python's float() reads."""
    return v if v == v and v not in (float("inf"), float("-inf")) else repr(v)


def _register(v, key: str, at: str):
    if isinstance(v, str) and v in ("nan", "inf", "-inf"):
        return float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise PlanError(f"{at}: registers maps register numbers to numbers (or 'nan', 'inf', '-inf'), "
                        f"got {key!r}: {v!r}")
    return v


def _execute(op, target, session, config, at):
    from eidos.isa import ExecutionParams, LaunchConfig

    program = _program(op, session, at)
    launch = field(op, "config", dict, at, default={})
    try:
        cfg = LaunchConfig(tuple(launch.get("grid", (1, 1, 1))), tuple(launch.get("block", (1, 1, 1))),
                           int(launch.get("shared_memory", 0)))
    except (TypeError, ValueError) as e:
        raise PlanError(f"{at}: config must hold grid and block as three integers each: {e}") from None
    registers = field(op, "registers", dict, at, default={})
    regs = {}
    for key, value in registers.items():
        if not key.isdigit():
            raise PlanError(f"{at}: registers maps register numbers to numbers, got key {key!r}")
        regs[int(key)] = _register(value, key, at)
    target.execute_program_with_params(program, ExecutionParams(cfg, regs))
    return Entry(0, "run", 0, meta={"program_key": program.digest()})          # an outcome, nothing kept


def _program(op: dict, session: Session, at: str):
    """The op's program: sent in full (validated, then kept under its digest) or named by a digest this
    session sent before, so a repeated run costs no parsing."""
    from eidos.isa import serialize

    programs = session.programs
    if "program" in op:
        program = serialize.from_dict(field(op, "program", dict, at)).validate()
        if len(programs) >= MAX_PROGRAMS:
            programs.pop(next(iter(programs)))
        programs[program.digest()] = program
        return program
    key = field(op, "program_key", str, at)
    program = programs.get(key)
    if program is None:
        raise PlanError(f"{at}: no program {key[:16]!r}... in this session; send it in full once (\"program\")")
    return program


_ISA_OPS: dict[str, Callable] = {"allocate": _allocate, "write": _write, "read": _read, "free": _free,
                                 "execute": _execute, "describe": _describe, "state": _state, "close": _close}


# ---- tensors ------------------------------------------------------------------------------------------

def run_tensor(fragment: dict, session: Session, config, cancelled: threading.Event) -> list[Entry]:
    try:
        from eidos.remote import tensors
    except ImportError as e:   # pragma: no cover - the module ships with eidos
        raise BackendUnavailable(f"this service cannot run tensor work: {e}") from e
    return tensors.run_fragment(fragment, session, config)


RUNNERS: dict[str, Callable] = {"plan": run_plan, "isa": run_isa, "tensor": run_tensor}


def failure(e: BaseException) -> EidosError:
    """What the client is told of a failed run: eidos errors as they are, anything else wrapped."""
    if isinstance(e, EidosError):
        return e
    error = ExecutionError(f"the service failed while running the fragment: {type(e).__name__}: {e}")
    error.__cause__ = e
    return error
