"""Fuzzing the ISA program loader (`isa.from_json`, `Program.from_json`): any document loads or raises
an IsaError, never another exception, never a side effect; a program that loads validates,
disassembles, serializes and hashes, or raises an EidosError."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eidos import isa
from eidos.errors import EidosError, IsaError
from eidos.isa import Address, Condition, Label, LaunchConfig, Predicate, ProgramBuilder, Register, Special, Type
from tests.isa.strategies import every_instruction
from tests.security.fuzz import FUZZ, Watch, as_text, deeply_nested, mutated, truncated, vocabulary

KERNEL = {"kernel": "axpy", "type": "f32", "count": 1024,
          "inputs": {"x": 1, "y": {"buffer": 2, "offset": 0}}, "outputs": {"out": 3},
          "let": [["t", {"op": "mul", "args": [2.0, "x"]}]],
          "compute": {"out": {"op": "where", "args": [{"op": "lt", "args": ["t", 0]}, {"op": "relu", "args": ["y"]},
                                                      {"op": "fma", "args": ["t", "y", 1.5]}]}}}


def _loop() -> isa.Program:
    r = [Register(i) for i in range(6)]
    b = ProgramBuilder(metadata={"name": "sum"})
    b.add(isa.MOV(r[0], Special.GLOBAL_ID, Type.U64), isa.CVT(r[5], r[0], Type.U64, Type.I64),
          isa.MOV_IMM(r[1], 0, Type.I64), isa.MOV_IMM(r[2], 10, Type.I64))
    top = b.label("top")
    b.add(isa.ADD(r[1], r[1], r[5], Type.I64), isa.SETcc(Predicate(1), r[1], r[2], Condition.LT, Type.I64),
          isa.BRA(top, Predicate(1)), isa.STG(Address.register(r[3]), r[1], Type.I64),
          isa.LDG(r[4], Address.buffer(1, 8), Type.F32), isa.BarSync(0), isa.EXIT())
    return b.build()


def _seeds() -> list[dict]:
    every = isa.Program(every_instruction(), {"start": 0}, 0, {"note": "one of each"})
    docs = [json.loads(p.to_json()) for p in (every, _loop(), isa.from_json(KERNEL))]
    chunks = [json.loads(isa.Program(every.instructions[i:i + 8], {"start": 0}).to_json())
              for i in range(0, len(every), 8)]
    return docs + chunks + [KERNEL]


SEEDS = _seeds()
LEAVES = [ins for doc in SEEDS[:1] for ins in doc["instructions"]] + [KERNEL["compute"]["out"]]
WORDS = vocabulary(SEEDS) + [t.name for t in Type] + [t.name.lower() for t in Type] + sorted(isa.instructions.INSTRUCTIONS) + [
    "r0", "r255", "r256", "r-1", "p0", "p15", "p16", "p-1", "@start", "@nowhere", "%global_id", "%bogus", "buffer",
    "pool", "shared", "class", "register", 0, 1, 255, 256, 2**64, -1, 0.5]


@pytest.fixture(scope="module")
def watch(tmp_path_factory):
    import os

    work = tmp_path_factory.mktemp("isa-work")
    old = os.getcwd()
    os.chdir(work)
    w = Watch([work])
    try:
        with w.patched():
            yield w
    finally:
        os.chdir(old)


def check(doc_or_text, watch: Watch) -> None:
    with watch.check():
        try:
            program = isa.from_json(doc_or_text)
        except IsaError:
            return
        str(program)
        program.digest()
        back = isa.from_json(program.to_json())  # the same program (compared by its canonical form: NaN
        assert back.canonical() == program.canonical()  # immediates make instructions unequal to themselves)
        try:
            program.validate()
        except EidosError:
            pass


@FUZZ
@given(data=st.data())
def test_mutated_programs(watch, data):
    doc = data.draw(mutated(SEEDS, LEAVES, WORDS, "instructions"), label="document")
    text = as_text(doc)
    check(doc if text is None or data.draw(st.booleans(), label="as a dict") else text, watch)


@FUZZ
@given(data=st.data())
def test_mutated_json_kernels(watch, data):
    doc = data.draw(mutated([KERNEL], LEAVES[-1:], WORDS, "compute"), label="kernel")
    text = as_text(doc)
    check(doc if text is None else text, watch)


@FUZZ
@given(data=st.data())
def test_truncated_programs(watch, data):
    with pytest.raises(IsaError):
        check(data.draw(truncated(SEEDS), label="text"), watch)
        raise IsaError("loaded")  # a cut document may still be valid JSON (a cut number): it must not load


@FUZZ
@given(data=st.data())
def test_deeply_nested_programs(watch, data):
    text = data.draw(deeply_nested(SEEDS, data.draw(st.sampled_from(["instructions", "dst", "value", "compute"]))))
    with watch.check(), pytest.raises(IsaError):
        isa.from_json(text)


@pytest.mark.parametrize("text", [
    '{"format": "eidos.isa.program", "version": 1, "instructions": ' + "[" * 10_000 + "]" * 10_000 + "}",
    "[" * 100_000,
    '{"format": "eidos.isa.program", "version": 1, "instructions": [{"op": "MOV_IMM", "dst": "r1", "imm": '
    + "[" * 5000 + "]" * 5000 + ', "ty": "I32"}]}',
    '{"format": "eidos.isa.program", "version": 1, "instructions": [{"op": "MOV_IMM", "dst": "r1", "imm": '
    + "9" * 5000 + ', "ty": "I32"}]}',
    '{"format": "eidos.isa.program", "version": 1e400, "instructions": []}',
    '{"compute": {"out": ' + '{"op": "neg", "args": [' * 3000 + "1" + "]}" * 3000 + '}, "count": 1, "outputs": {"out": 1}}',
])
def test_hostile_programs(text):
    with pytest.raises(IsaError):
        isa.from_json(text)


@pytest.mark.parametrize("instruction, words", [
    ({"op": "LDG", "dst": "r1", "src": {"space": "buffer", "handle": 2**70, "offset": 0}, "ty": "U32"},
     "field src: an address handle must be a 64-bit integer, got an integer of 71 bits"),
    ({"op": "MOV_IMM", "dst": "r1", "value": 10**5000, "ty": "I32"}, "field value: a 16610-bit integer is out of range"),
    ({"op": "GEMM", "c": {"space": "buffer", "handle": 1, "offset": 0}, "a": {"space": "buffer", "handle": 1, "offset": 0},
      "b": {"space": "buffer", "handle": 1, "offset": 0}, "m": 1, "n": 1, "k": 1, "alpha": 2**1024, "beta": 0.0,
      "ty": "F32"}, "field alpha: a 1025-bit integer is out of range"),
    ({"op": "LOOP", "counter": "r1", "iterations": "r2", "target": "@start"}, "field iterations: \"r2\" is not a int"),
    ({"op": "PoolFree", "handle": "r1"}, "field handle: \"r1\" is not a int"),
    ({"op": "BRA", "target": "r1"}, "field target: \"r1\" is not a Label"),
    ({"op": "ADD", "dst": "r1", "lhs": "r1", "rhs": "r1", "ty": "U32", 10**5000: 1}, "unknown field"),
])
def test_hostile_fields(instruction, words):
    with pytest.raises(IsaError, match=words):
        isa.from_json({"format": "eidos.isa.program", "version": 1, "instructions": [instruction]})


def test_the_seeds_load_and_run():
    """The fuzzing starts from programs that load: mutations test the loader, not the seeds."""
    from eidos.isa.backends import ReferenceBackend

    for doc in SEEDS:
        program = isa.from_json(doc)
        assert isa.from_json(program.to_json()) == program
    be = ReferenceBackend()
    a, b, c = (be.allocate_buffer(4096) for _ in range(3))
    be.execute_program(isa.from_json(KERNEL), LaunchConfig.linear(64))
    assert Label("top") == _loop().instructions[6].target
    for h in (a, b, c):
        be.free_buffer(h)


def test_names_in_a_program_never_become_code(tmp_path):
    """Kernel targets generate source from a program; what a document names (labels, metadata) reaches
    that source only as the numbers it resolves to, never as text."""
    from eidos.isa.backends import CpuBackend, ReferenceBackend

    marker = tmp_path / "pwned"
    evil = f'x"]\nimport os; os.system("touch {marker}")  # '
    text = json.dumps({
        "format": "eidos.isa.program", "version": 1, "metadata": {"name": evil, "code": f"__import__('os').system('touch {marker}')"},
        "labels": {evil: 2}, "entry": 0,
        "instructions": [{"op": "MOV_IMM", "dst": "r1", "value": 3, "ty": "I32"},
                         {"op": "BRA", "target": "@" + evil},
                         {"op": "MOV_IMM", "dst": "r2", "value": 4, "ty": "I32"}, {"op": "EXIT"}]})
    program = isa.from_json(text).validate()
    for backend in (ReferenceBackend(), CpuBackend()):
        backend.execute_program(program, LaunchConfig.linear(4))
    assert not marker.exists()
    doc = json.loads(text)
    doc["instructions"][0]["value"] = "@" + evil  # a label where a number belongs
    with pytest.raises(IsaError, match=r"instruction 0 \(MOV_IMM\): field value: .* is not a int \| float"):
        isa.from_json(doc)
