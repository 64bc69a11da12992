"""Programs: builder, labels, validation messages, disassembly, JSON round trip, JSON kernels."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eidos import isa
from eidos.errors import IsaError
from eidos.isa import Address, Label, LaunchConfig, Predicate, Register, Special, Type
from tests.isa.strategies import every_instruction

R = Register
F32, U32 = Type.F32, Type.U32


def test_type_properties():
    assert Type.F32.size_bytes == 4 and Type.BF16.size_bytes == 2 and Type.I4096.size_bytes == 512
    assert Type.U128.size_bytes == 16 and Type.I8.size_bytes == 1
    assert Type.BF16.is_float and not Type.BF16.is_integer and Type.BF16.is_signed
    assert Type.U64.is_unsigned and not Type.U64.is_signed and Type.I2048.is_signed and Type.I2048.is_integer
    import ml_dtypes
    assert Type.BF16.np_dtype == np.dtype(ml_dtypes.bfloat16)
    assert Type.parse("f16") is Type.F16
    assert len(Type) == 24


def test_launch_config():
    assert LaunchConfig.linear(256).total_threads() == 256
    assert LaunchConfig.linear(1000).total_threads() == 1000 and LaunchConfig.linear(1000).block[0] <= 256
    assert LaunchConfig.linear(257).total_threads() == 257
    assert LaunchConfig.grid_2d(40, 30).total_threads() == 1200
    c = LaunchConfig(grid=(2, 3, 1), block=(4, 4, 2), shared_memory=64)
    assert c.total_threads() == 6 * 32 and c.shared_memory == 64
    with pytest.raises(IsaError, match="block of 2048 lanes exceeds 1024"):
        LaunchConfig(block=(2048, 1, 1))
    with pytest.raises(IsaError, match="grid must be three"):
        LaunchConfig(grid=(1, 1))


def test_builder_chains_and_labels():
    b = isa.ProgramBuilder()
    assert b.add(isa.MOV_IMM(R(0), 1, U32)) is b
    top = b.label("top")
    b.add(isa.BRA(Label("end"), Predicate(0)), isa.BRA(top))
    end = b.label("end")
    p = b.build()
    assert len(p) == 3 and p.labels == {"top": 1, "end": 3} and p.target(end) == 3 and p.entry == 0
    assert isinstance(b.label(), Label)
    with pytest.raises(IsaError, match="label 'top' is already bound to instruction 1"):
        b.label("top")
    with pytest.raises(IsaError, match="instruction 3 is a str"):
        b.add("ADD")


BAD = [
    (isa.ADD(R(256), R(1), R(2), F32), "instruction 1 (ADD.F32 r256, r1, r2): dst: register r256 out of range r0..r255"),
    (isa.SETcc(Predicate(16), R(1), R(1), isa.Condition.EQ, F32), "predicate p16 out of range p0..p15"),
    (isa.AND(R(1), R(1), R(1), F32), "type mismatch: AND takes an integer type, got F32"),
    (isa.EXP(R(2), R(3), Type.I32), "type mismatch: EXP takes a float type, got I32"),
    (isa.ADD(R(2), R(1), R(1), Type.I32), "type mismatch: lhs r1 holds F32 (written by instruction 0), read as I32"),
    (isa.BRA(Label("nowhere")), "undefined label 'nowhere'"),
    (isa.BRA(Label("tops")), "undefined label 'tops'; did you mean 'top'?"),
    (isa.LDG(R(1), Address.cls(96, 0), F32), "class 96 out of range 0..95"),
    (isa.LDG(R(1), Address.cls(3, 12288), F32), "class offset 12288 out of bounds"),
    (isa.ParallelMap(Address.cls(95, 12000), Address.buffer(1), 100, isa.MapOperation.Abs),
     "constant offset out of bounds: 400 bytes at class 95 offset 12000"),
    (isa.MOV_IMM(R(1), 300, Type.U8), "MOV_IMM value 300 is not representable as U8"),
    (isa.MOV_IMM(R(1), 1.5, Type.I32), "MOV_IMM value 1.5 is not representable as I32"),
    (isa.MOV(R(1), Special.GLOBAL_ID, F32), "special value %global_id is an integer"),
    (isa.ParallelMap(Address.buffer(1), Address.buffer(1), 4, isa.MapOperation.Exp, Type.I32),
     "type mismatch: Exp takes a float type, got I32"),
    (isa.ParallelMap(Address.buffer(1), Address.buffer(1), 4, isa.MapOperation.Abs, Type.I128),
     "array instruction ParallelMap takes types up to 64 bits, got I128"),
    (isa.ParallelMap(Address.shared(0), Address.buffer(1), 4, isa.MapOperation.Abs),
     "shared memory is per block; the grid-wide ParallelMap cannot address it"),
    (isa.LDG(R(1), Address.shared(0), F32), "LDG addresses global memory; use LDS for shared"),
    (isa.STS(Address.buffer(1), R(1), F32), "STS addresses shared memory; got a buffer address"),
    (isa.LDG(R(1), Address.buffer(0), F32), "handle 0 is not a valid buffer handle"),
    (isa.NBRLoad(R(1), R(2), 200, U32), "neighbour offset 200 out of the i8 range -128..127"),
    (isa.ResAccum(R(1), R(2), 96, F32), "class 96 out of range 0..95"),
    (isa.PoolLoad(R(1), 0, 0, F32), "pool handle 0 is not valid"),
    (isa.GEMM(Address.buffer(1), Address.buffer(2), Address.buffer(3), -1, 2, 2), "m must be >= 0, got -1"),
    (isa.RoPE(Address.buffer(1), Address.buffer(1), Address.buffer(1), 1, 1, 1, 3), "RoPE needs an even head_dim"),
    (isa.STG(Address.buffer(1), R(1), Type.I32), "type mismatch: src r1 holds F32 (written by instruction 0), read as I32"),
]


@pytest.mark.parametrize("bad,message", BAD, ids=[m[:40] for _, m in BAD])
def test_validate_names_index_and_problem(bad, message):
    b = isa.ProgramBuilder().add(isa.MOV_IMM(R(1), 2.0, F32))
    b.label("top")
    b.add(bad)
    with pytest.raises(IsaError) as e:
        b.build()
    assert "instruction 1 (" in str(e.value) and message in str(e.value)


def test_disassembly():
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(0), Special.GLOBAL_ID, U32))
    loop = b.label("loop")
    b.add(isa.ADD(R(1), R(1), R(0), U32), isa.BRA(loop, Predicate(3)),
          isa.ParallelMap(Address.buffer(2, 16), Address.register(R(4)), 8, isa.MapOperation.Relu),
          isa.CVT(R(5), R(1), U32, F32), isa.EXIT())
    text = str(b.build())
    assert text.splitlines() == [
        "  0  MOV.U32 r0, %global_id",
        "loop:",
        "  1  ADD.U32 r1, r1, r0",
        "  2  BRA @loop, p3",
        "  3  ParallelMap.F32 dst_array=[buf2+16], src_array=[r4], count=8, operation=Relu",
        "  4  CVT.U32.F32 r5, r1",
        "  5  EXIT",
    ]


def test_every_instruction_round_trips_through_json():
    ins = every_instruction()
    assert {i.name for i in ins} == set(isa.INSTRUCTIONS) and len(ins) >= 92
    b = isa.ProgramBuilder(metadata={"name": "all"})
    b.label("start")
    b.add(*ins, isa.MOV_IMM(R(3), float("nan"), F32), isa.MOV_IMM(R(3), -float("inf"), Type.F64),
          isa.MOV_IMM(R(4), 2 ** 4000, Type.U4096))
    p = b.build(validate=False)
    text = p.to_json()
    q = isa.Program.from_json(text)
    assert q.to_json() == text and str(q) == str(p) and q.metadata == {"name": "all"}
    assert isa.from_json(text).to_json() == text and isa.from_json(json.loads(text)).to_json() == text
    assert q.digest() == p.digest()


@pytest.mark.parametrize("doc,message", [
    ("{", "ISA program JSON is malformed"),
    ('{"format": "eidos.isa.program", "version": 9, "instructions": []}', "unsupported ISA program version 9"),
    ('{"format": "eidos.isa.program", "version": 1, "instructions": [{"op": "ADDD"}]}',
     "instruction 0: unknown instruction 'ADDD'; did you mean 'ADD'?"),
    ('{"format": "eidos.isa.program", "version": 1, "instructions": [{"op": "EXIT", "x": 1}]}',
     "instruction 0 (EXIT): unknown field(s) ['x']"),
    ('{"format": "eidos.isa.program", "version": 1, "instructions": [{"op": "ADD", "dst": "q1"}]}',
     "instruction 0 (ADD): field dst: cannot read 'q1'"),
    ('{"format": "eidos.isa.program", "version": 1, "instructions": [{"op": "ADD", "dst": "r1"}]}',
     "instruction 0 (ADD):"),
    ('[1]', "expected a JSON object"),
    ('{"a": 1}', "neither an ISA program"),
])
def test_json_errors(doc, message):
    with pytest.raises(IsaError, match=None) as e:
        isa.from_json(doc)
    assert message in str(e.value)


def _kernel_backend():
    from eidos.isa.backends import ReferenceBackend
    return ReferenceBackend()


def test_json_kernel_runs_elementwise_math():
    be = _kernel_backend()
    n = 37
    x, y = np.linspace(-3, 3, n).astype(np.float32), np.arange(n, dtype=np.float32)
    hx, hy, ho, ho2 = (be.allocate_buffer(4 * n) for _ in range(4))
    be.copy_to_buffer(hx, x)
    be.copy_to_buffer(hy, y)
    kernel = {"kernel": "mix", "type": "f32", "count": n,
              "inputs": {"x": hx, "y": {"buffer": hy, "offset": 0}}, "outputs": {"out": ho, "gate": ho2},
              "let": [["t", {"op": "fma", "args": ["x", 2, "y"]}]],
              "compute": {"out": {"op": "where", "args": [{"op": "gt", "args": ["x", 0]},
                                                          {"op": "sqrt", "args": ["t"]}, {"op": "neg", "args": ["t"]}]},
                          "gate": {"op": "relu", "args": [{"op": "sub", "args": ["x", 0.5]}]}}}
    p = isa.from_json(json.dumps(kernel))
    assert p.metadata == {"kernel": "mix"}
    for cfg in (LaunchConfig.linear(1), LaunchConfig.linear(8), LaunchConfig.linear(64)):
        be.execute_program(p, cfg)
        out, gate = np.empty(n, np.float32), np.empty(n, np.float32)
        be.copy_from_buffer(ho, out)
        be.copy_from_buffer(ho2, gate)
        t = (x.astype(np.float64) * 2 + y).astype(np.float32)
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(out, np.where(x > 0, np.sqrt(t), -t))
        np.testing.assert_array_equal(gate, np.maximum(x - np.float32(0.5), 0))


@pytest.mark.parametrize("kernel,message", [
    ({"count": 4, "compute": {"o": "x"}, "inputs": {"x": 1}, "outputs": {}}, "compute names ['o'] are not outputs"),
    ({"count": 4, "compute": {"o": "xx"}, "inputs": {"x": 1}, "outputs": {"o": 2}}, "unknown name 'xx'"),
    ({"count": 4, "compute": {"o": {"op": "sqr", "args": ["x"]}}, "inputs": {"x": 1}, "outputs": {"o": 2}},
     "unknown op 'sqr'; did you mean 'sqrt'?"),
    ({"count": 4, "compute": {"o": {"op": "add", "args": ["x"]}}, "inputs": {"x": 1}, "outputs": {"o": 2}},
     "add takes 2 argument(s), got 1"),
    ({"count": -1, "compute": {"o": "x"}, "inputs": {"x": 1}, "outputs": {"o": 2}}, "count must be an integer in 0..2**64-1"),
    ({"count": 4, "type": "f33", "compute": {"o": "x"}, "inputs": {"x": 1}, "outputs": {"o": 2}}, "unknown type 'f33'"),
    ({"count": 4, "compute": {"o": "x"}, "inputs": {"x": 0}, "outputs": {"o": 2}}, "needs a buffer handle in 1..2**32-1"),
])
def test_json_kernel_errors(kernel, message):
    with pytest.raises(IsaError) as e:
        isa.from_json(kernel)
    assert message in str(e.value)


def test_import_is_light():
    import subprocess
    import sys
    code = "import sys, eidos.isa, eidos.isa.backends; print('numba' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_program_level_checks():
    with pytest.raises(IsaError, match="label 'x' marks instruction 5, outside 0..1"):
        isa.Program([isa.EXIT()], {"x": 5}).validate()
    with pytest.raises(IsaError, match="entry 3 is outside the program"):
        isa.Program([isa.EXIT()], entry=3).validate()
    with pytest.raises(IsaError, match="not representable as F32"):
        isa.ProgramBuilder().add(isa.MOV_IMM(R(1), 10 ** 400, F32)).build()


def test_entry_and_kernel_arguments():
    from eidos.isa.backends import ReferenceBackend
    be = ReferenceBackend()
    out = be.allocate_buffer(4)
    p = isa.Program([isa.MOV_IMM(R(1), 111, U32), isa.STG(Address.buffer(out), R(1), U32)], entry=1)
    be.execute_program_with_params(p, isa.ExecutionParams(LaunchConfig.linear(1), {1: 42}))
    got = np.empty(1, np.uint32)
    be.copy_from_buffer(out, got)
    assert got[0] == 42
    assert p.optimize().entry == 0 and len(p.optimize()) == 1


def test_docs_define_every_instruction():
    import pathlib
    import re
    text = (pathlib.Path(__file__).parents[2] / "docs" / "isa.md").read_text()
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    missing = sorted(set(isa.INSTRUCTIONS) - words)
    assert not missing, f"docs/isa.md does not define {missing}"
