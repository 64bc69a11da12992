"""Compile the extension kernels ahead of time for a GPU target, without a GPU.

    python -m eidos.isa.backends.triton.kernels.build            # every variant, sm_90 (Hopper)
    python -m eidos.isa.backends.triton.kernels.build --quick    # the large Hopper tiles only
    python -m eidos.isa.backends.triton.kernels.build --strict   # spilling registers fails too

The interpreter runs the kernels' logic on the CPU but never compiles them; this runs Triton's
real pipeline (TTIR, TTGIR, LLVM, PTX, and ptxas to a cubin) for each variant the autotuner can
pick, and checks the PTX for what the variant exists for: wgmma (Hopper tensor cores) in 16-bit
products, cp.async.bulk.tensor (TMA) in the descriptor forms; it also reports each variant's
registers and spilled bytes (ptxas -v). It must run with TRITON_INTERPRET unset (kernels defined
for the interpreter are not compilable objects).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field


@dataclass
class Variant:
    label: str
    kernel: object
    types: dict  # argument -> Triton type ("*bf16", "tensordesc<bf16[128, 64]>", "i64"); others i32
    consts: dict  # constexpr arguments
    warps: int = 4
    stages: int = 3
    expect: tuple = ()  # strings the PTX must contain
    quick: bool = False  # in the --quick set
    gluon: bool = False  # a Gluon kernel: `types` holds example arguments to specialize on
    result: str = field(default="", init=False)
    shared: int = field(default=0, init=False)
    registers: str = field(default="", init=False)


def _jit(kernel):
    """The JITFunction under autotuner and heuristics wrappers."""
    while not hasattr(kernel, "arg_names") or not hasattr(kernel, "src"):
        kernel = kernel.fn
    return kernel


def variants() -> list[Variant]:
    import triton.language as tl

    from . import attention, elementwise, gemm, norms, softmax, sparse

    f32, f64 = tl.float32, tl.float64
    out: list[Variant] = []
    unit = dict(sak=1, sbn=1, scn=1, sdn=1, GROUP_M=8)
    for t, acc, prec, (bm, bn, bk), w, st, quick in [
            ("bf16", f32, "tf32", (128, 256, 64), 8, 3, True), ("fp16", f32, "tf32", (128, 128, 64), 4, 4, False),
            ("fp32", f32, "ieee", (64, 64, 16), 4, 3, False), ("fp64", f64, "ieee", (64, 64, 16), 4, 3, False),
            ("bf16", f32, "tf32", (16, 16, 16), 2, 3, False)]:
        for beta in (False, True):
            out.append(Variant(f"gemm {t} {bm}x{bn}x{bk} beta={beta}", gemm.gemm_kernel,
                               {n: f"*{t}" for n in ("a_ptr", "b_ptr", "c_ptr", "d_ptr")} | {"ab_ptr": "*fp64"},
                               dict(HAS_BETA=beta, SCALE=True, ACC=acc, PRECISION=prec, BLOCK_M=bm, BLOCK_N=bn,
                                    BLOCK_K=bk, **unit), w, st,
                               ("wgmma",) if t in ("bf16", "fp16") and bm >= 64 else (), quick and not beta))
    out.append(Variant("gemm fp16 -> fp32 (MixedPrecisionGEMM)", gemm.gemm_kernel,
                       {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "d_ptr": "*fp32", "ab_ptr": "*fp64"},
                       dict(HAS_BETA=False, SCALE=False, ACC=f32, PRECISION="tf32", BLOCK_M=128, BLOCK_N=128,
                            BLOCK_K=64, **unit), 4, 4, ("wgmma",)))
    for t in ("bf16", "fp16"):
        for bm, bn, bk, w, st, persistent in [(128, 256, 64, 8, 3, False), (128, 128, 64, 4, 4, False),
                                              (64, 64, 64, 4, 4, False), (128, 256, 64, 8, 3, True),
                                              (128, 128, 64, 8, 4, True)]:
            out.append(Variant(f"gemm_tma {t} {bm}x{bn}x{bk}{' persistent' if persistent else ''}", gemm.gemm_tma_kernel,
                               {"a_desc": f"tensordesc<{t}[{bm}, {bk}]>", "b_desc": f"tensordesc<{t}[{bk}, {bn}]>",
                                "d_desc": f"tensordesc<{t}[{bm}, {bn}]>", "ab_ptr": "*fp64"},
                               dict(SCALE=True, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, PERSISTENT=persistent),
                               w, st, ("wgmma", "cp.async.bulk.tensor"), quick=(t == "bf16" and bn == 256)))
    for bm, bn, bk, w, st, wide in [(128, 128, 128, 8, 3, False), (128, 128, 64, 8, 4, False),
                                    (64, 64, 64, 4, 4, True), (32, 32, 32, 4, 3, True)]:
        out.append(Variant(f"quantized int8 {bm}x{bn}x{bk} wide={wide}", gemm.quantized_kernel,
                           {"a_ptr": "*i8", "b_ptr": "*i8", "s_ptr": "*fp64", "d_ptr": "*i8"},
                           dict(WIDE=wide, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8), w, st, quick=bm == 128))
    for t, acc in [("fp32", f32), ("bf16", f32), ("fp16", f32), ("fp64", f64)]:
        for single, block, w in [(True, 4096, 8), (False, 4096, 16), (True, 64, 4)]:
            out.append(Variant(f"softmax {t} block={block} single={single}", softmax.softmax_kernel,
                               {"x_ptr": f"*{t}", "y_ptr": f"*{t}"}, dict(ACC=acc, BLOCK=block, SINGLE=single), w, 1,
                               quick=(t == "fp32" and block == 4096)))
        stat = f64 if t in ("fp32", "fp64") else f32
        for single, block in [(True, 1024), (False, 2048)]:
            out.append(Variant(f"norm {t} single={single}", norms.norm_kernel,
                               {n: f"*{t}" for n in ("x_ptr", "g_ptr", "b_ptr", "y_ptr")} | {"eps_ptr": "*fp64"},
                               dict(ACC=stat, BLOCK=block, SINGLE=single), 8))
        out.append(Variant(f"batch_norm {t}", norms.batch_norm_kernel,
                           {n: f"*{t}" for n in ("x_ptr", "g_ptr", "b_ptr", "mean_ptr", "var_ptr", "y_ptr")}
                           | {"eps_ptr": "*fp64", "total": "i64"}, dict(ACC=acc, BLOCK=1024)))
        out.append(Variant(f"rope {t}", elementwise.rope_kernel,
                           {"x_ptr": f"*{t}", "f_ptr": f"*{t}", "y_ptr": f"*{t}", "pairs": "i64"}, dict(BLOCK=1024)))
        out.append(Variant(f"layer_scale {t}", elementwise.scale_kernel,
                           {"x_ptr": f"*{t}", "s_ptr": f"*{t}", "y_ptr": f"*{t}", "n": "i64"}, dict(ACC=acc, BLOCK=1024)))
        out.append(Variant(f"csr {t}", sparse.csr_kernel, {"ptr_ptr": "*i32", "idx_ptr": "*i32", "val_ptr": f"*{t}",
                                                          "b_ptr": f"*{t}", "c_ptr": f"*{t}"}, dict(ACC=acc, BLOCK_N=128)))
    ptrs = lambda t: {n: f"*{t}" for n in ("q_ptr", "k_ptr", "v_ptr", "o_ptr")} | {"scale_ptr": "*fp64"}  # noqa: E731
    for t, acc, prec, d, bm, bn, w, st in [("bf16", f32, "tf32", 128, 128, 128, 8, 3), ("bf16", f32, "tf32", 128, 128, 64, 8, 3),
                                           ("fp16", f32, "tf32", 64, 64, 64, 4, 4), ("bf16", f32, "tf32", 16, 16, 16, 2, 2),
                                           ("fp32", f32, "ieee", 16, 32, 32, 4, 2), ("fp64", f64, "ieee", 16, 32, 16, 4, 2)]:
        big = bm >= 64 and t in ("bf16", "fp16")
        for causal in (False, True):
            for even in (True, False):
                out.append(Variant(f"attention {t} D{d} {bm}x{bn} causal={causal} even={even}", attention._attention,
                                   ptrs(t), dict(HEAD_DIM=d, BLOCK_D=d, CAUSAL=causal, TMA=False, ACC=acc, PRECISION=prec,
                                                 BLOCK_M=bm, BLOCK_N=bn, EVEN_M=even, EVEN_N=even), w, st,
                                   ("wgmma",) if big else (), quick=(d == 128 and bn == 128 and even)))
            if t in ("bf16", "fp16"):
                descs = {"q_ptr": f"tensordesc<{t}[{bm}, {d}]>", "k_ptr": f"tensordesc<{t}[{bn}, {d}]>",
                         "v_ptr": f"tensordesc<{t}[{bn}, {d}]>", "o_ptr": f"tensordesc<{t}[{bm}, {d}]>", "scale_ptr": "*fp64"}
                out.append(Variant(f"attention TMA {t} D{d} {bm}x{bn} causal={causal}", attention._attention, descs,
                                   dict(HEAD_DIM=d, BLOCK_D=d, CAUSAL=causal, TMA=True, ACC=acc, PRECISION=prec,
                                        BLOCK_M=bm, BLOCK_N=bn, EVEN_M=True, EVEN_N=True), w, st,
                                   ("cp.async.bulk.tensor",) + (("wgmma",) if big else ()), quick=(d == 128 and bn == 128)))
    out.append(Variant("attention bf16 D80 padded to 128", attention._attention, ptrs("bf16"),
                       dict(HEAD_DIM=80, BLOCK_D=128, CAUSAL=False, TMA=False, ACC=f32, PRECISION="tf32", BLOCK_M=128,
                            BLOCK_N=64, EVEN_M=False, EVEN_N=False), 8))
    return out + _gluon_variants()


def _gluon_variants() -> list[Variant]:
    """flash_hopper.py's two schedules: descriptors over a CPU tensor stand in for the device's (only
    their block shape and layout reach the compiler)."""
    import torch
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from . import flash_hopper

    out = []
    for d, early in ((128, False), (128, True), (64, False)):
        t = torch.empty(512, d, dtype=torch.bfloat16)

        def desc(b, t=t, d=d):
            return TensorDescriptor(t, [512, d], [d, 1], [b, d], gl.NVMMASharedLayout.get_default_for([b, d], gl.bfloat16))

        args = dict(q_desc=desc(64), k_desc=desc(128), v_desc=desc(128), o_desc=desc(64))
        for causal in (False, True):
            out.append(Variant(f"attention Gluon bf16 D{d} early={early} causal={causal}", flash_hopper._flash_ws,
                               args, dict(CAUSAL=causal, STAGES=3, EARLY=early), 4,
                               expect=("wgmma", "cp.async.bulk.tensor"), quick=d == 128, gluon=True))
    return out


def compile_variant(v: Variant, arch: int) -> None:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = _jit(v.kernel)
    if v.gluon:
        from triton._C.libtriton import native_specialize_impl
        from triton.backends.compiler import BaseBackend
        from triton.experimental.gluon._runtime import GluonASTSource

        sig = {n: "constexpr" if n in v.consts or n == "num_warps" else
               native_specialize_impl(BaseBackend, v.types[n], False, True, True)[0] if n in v.types else
               "fp32" if n == "scale" else "i32" for n in fn.arg_names}
        src = GluonASTSource(fn, sig, dict(v.consts) | {"num_warps": v.warps})
        try:
            k = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=dict(num_warps=v.warps))
        except Exception as e:
            v.result = f"FAILED {type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
            return
        _report(v, k, arch)
        return
    sig = {n: "constexpr" if n in v.consts else v.types.get(n, "i32") for n in fn.arg_names}
    # the launcher's usual specialization: pointers and sizes divisible by 16
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in fn.arg_names
             if sig[n] != "constexpr" and not sig[n].startswith(("tensordesc", "fp"))}
    try:
        k = triton.compile(ASTSource(fn, sig, constexprs=dict(v.consts), attrs=attrs),
                           target=GPUTarget("cuda", arch, 32), options=dict(num_warps=v.warps, num_stages=v.stages))
    except Exception as e:  # reported per variant, the run goes on
        v.result = f"FAILED {type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
        return
    _report(v, k, arch)


def _report(v: Variant, k, arch: int) -> None:
    missing = [e for e in v.expect if e not in k.asm["ptx"]]
    v.shared = k.metadata.shared
    v.result = "ok" if not missing else f"no {', '.join(missing)} in the PTX"
    v.registers = _registers(k.asm["ptx"], arch)


def _registers(ptx: str, arch: int) -> str:
    """'N regs, S B spilled' from ptxas -v on the kernel's PTX (the ptxas Triton ships)."""
    import pathlib
    import re
    import subprocess
    import tempfile

    import triton

    ptxas = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as d:
        src = pathlib.Path(d) / "k.ptx"
        src.write_text(ptx)
        run = subprocess.run([str(ptxas), f"-arch=sm_{arch}{'a' if arch >= 90 else ''}", "-v", str(src),
                              "-o", str(pathlib.Path(d) / "k.cubin")], capture_output=True, text=True)
    regs = re.search(r"Used (\d+) registers", run.stderr)
    spill = re.search(r"(\d+) bytes spill stores", run.stderr)
    return f"{regs.group(1) if regs else '?'} regs, {spill.group(1) if spill else '?'} B spilled"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", type=int, default=90, help="compute capability x 10 (90: H100/H200)")
    p.add_argument("--quick", action="store_true", help="only the large Hopper tiles of GEMM, attention, softmax")
    p.add_argument("--strict", action="store_true", help="a variant that spills registers fails too")
    args = p.parse_args(argv)
    from . import INTERPRET

    if INTERPRET:
        print("unset TRITON_INTERPRET: interpreter kernels cannot be compiled", file=sys.stderr)
        return 2
    todo = [v for v in variants() if v.quick or not args.quick]
    start = time.perf_counter()
    for v in todo:
        compile_variant(v, args.arch)
        print(f"{v.label:<56} {v.result:<10} shared memory {v.shared:>7} B  {v.registers}", flush=True)
    bad = [v for v in todo if v.result != "ok" or (args.strict and not v.registers.endswith(" 0 B spilled"))]
    print(f"{len(todo) - len(bad)}/{len(todo)} compiled for sm_{args.arch} in {time.perf_counter() - start:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
