"""Thread programs that between them use every handler of the Triton target (no engine imported
here, so a process without TRITON_INTERPRET can load them and compile the kernels for a GPU)."""

from __future__ import annotations

from eidos import isa
from eidos.isa import Address, Condition, Label, Predicate, Register, Special, Type

R = Register
U32, U64, I32, I64, F32, F64 = Type.U32, Type.U64, Type.I32, Type.I64, Type.F32, Type.F64


def hopper_programs():
    """Programs that between them use every emitter: one kernel each, compiled for sm_90."""
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(1), Special.GLOBAL_ID, I32), isa.MOV_IMM(R(2), 4, I32), isa.REM(R(3), R(1), R(2), I32),
          isa.MOV_IMM(R(4), 0, I32), isa.MOV_IMM(R(5), 1, I32), isa.MOV_IMM(R(6), 0, I32), isa.MOV_IMM(R(7), 0, I64))
    top = b.label("top")
    b.add(isa.ADD(R(4), R(4), R(1), I32), isa.ADD(R(6), R(6), R(5), I32), isa.CALL(Label("f")),
          isa.SETcc(Predicate(1), R(6), R(3), Condition.LE, I32), isa.BRA(top, Predicate(1)),
          isa.STS(Address.shared(0), R(4), I32), isa.BarSync(0), isa.LDS(R(8), Address.shared(0), I32),
          isa.MOV_IMM(R(10), isa.pointer(1), U64), isa.STG(Address.register(R(10)), R(8), I32),
          isa.CVT(R(11), R(8), I32, F32), isa.REM(R(12), R(11), R(11), F32), isa.CVT(R(12), R(12), F32, F64),
          isa.FMA(R(13), R(12), R(12), R(12), F64), isa.EXP(R(14), R(13), F64), isa.CVT(R(14), R(14), F64, Type.F16),
          isa.TANH(R(14), R(14), Type.F16), isa.CVT(R(14), R(14), Type.F16, U32), isa.ResAccum(R(15), R(14), 3, U32),
          isa.NBRLoad(R(16), R(10), 2, U32), isa.PhaseWrite(R(16), 4, U32), isa.LOOP(R(7), 3, top), isa.EXIT())
    b.label("f")
    b.add(isa.ADD(R(4), R(4), R(5), I32), isa.RET())
    ops = isa.ProgramBuilder()
    for k, ty in enumerate((Type.F16, Type.BF16, F32, F64, Type.I8, Type.U16, I32, U64)):
        r = [R(10 * k + j) for j in range(6)]
        ops.add(isa.LDG(r[0], Address.buffer(1, 8 * k), ty), isa.LDG(r[1], Address.buffer(1, 8 * k + 3), ty))
        for name in ("ADD", "SUB", "MUL", "DIV", "REM", "MIN", "MAX"):
            ops.add(getattr(isa, name)(r[2], r[0], r[1], ty))
        ops.add(isa.FMA(r[3], r[0], r[1], r[2], ty), isa.MAD(r[3], r[3], r[1], r[2], ty),
                isa.CLAMP(r[4], r[3], r[0], r[1], ty), isa.ABS(r[4], r[4], ty), isa.NEG(r[4], r[4], ty),
                isa.SETcc(Predicate(k % 16), r[4], r[0], Condition.LT, ty), isa.SEL(r[5], Predicate(k % 16), r[4], r[1], ty),
                isa.CVT(r[3], r[5], ty, I64 if ty.is_float else F64), isa.STG(Address.buffer(1, 8 * k), r[5], ty))
        if ty.is_float:
            for name in ("SQRT", "EXP", "LOG", "SIN", "COS", "TAN", "TANH", "SIGMOID", "RCP", "RSQRT", "FLOOR",
                         "CEIL", "ROUND", "TRUNC", "SIGN", "GELU", "SWISH"):
                ops.add(getattr(isa, name)(r[4], r[5], ty))
            ops.add(isa.LERP(r[4], r[4], r[5], r[0], ty), isa.FMS(r[4], r[4], r[5], r[0], ty))
        else:
            for name in ("AND", "OR", "XOR", "SHL", "SHR"):
                ops.add(getattr(isa, name)(r[4], r[5], r[0], ty))
            ops.add(isa.NOT(r[4], r[4], ty), isa.ClsGet(r[4], r[5], ty), isa.MIRROR(r[4], r[4], ty),
                    isa.BoundMap(r[4], r[4], ty), isa.UnityTest(Predicate(k), r[4], ty), isa.PhaseRead(r[4], 2, ty))
    coll = isa.ProgramBuilder().add(isa.MOV(R(1), Special.GLOBAL_ID, U64), isa.PoolAlloc(9, 64),
                                    isa.PoolStore(9, 0, R(1), U64), isa.ReduceAdd(R(2), Address.buffer(1), 4, F32),
                                    isa.STG(Address.buffer(1, 0), R(2), F32))
    return [("control", b.build()), ("every operation", ops.build()), ("collective", coll.build())]
