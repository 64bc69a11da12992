"""Attention forward beside torch's scaled_dot_product_attention, every form in one run (issue 15 item 6).

    python3 bench/gpu_attention.py [--shape 8,16,4096,128] [--rep 300]   # on an H100/H200

Per mask (full, causal): SDPA as torch picks it (and each of its backends alone, to name the one it
picked), the Triton kernel [tma] with the config its autotuner chose, and the Gluon kernel
(kernels/flash_hopper.py) in each config of --configs. Each output is poisoned (NaN) before its
check and compared with SDPA in float32 (relative Frobenius error, the bench's 2e-2 bound) and with
the Triton kernel's. Times: triton.testing.do_bench, min and median; SDPA is timed first and
again last, so its drift across the run shows. Ratios are SDPA's time over ours (>= 0.95 the goal).
"""

from __future__ import annotations

import argparse
import sys

import torch
import triton

from eidos.isa.backends.triton.kernels import attention, flash_hopper


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="8,16,4096,128", help="batch,heads,seq,head_dim")
    p.add_argument("--rep", type=int, default=300, help="do_bench repetition time in ms")
    p.add_argument("--configs", default="128,128,3,0;128,128,3,1;128,64,4,1;128,64,4,0",
                   help="Gluon BLOCK_M,BLOCK_N,STAGES,EARLY; ';' between configs")
    p.add_argument("--no-triton", action="store_true", help="skip the autotuned Triton kernel")
    return p.parse_args()


def timed(fn, rep):
    med, lo = triton.testing.do_bench(fn, rep=rep, quantiles=[0.5, 0.0])
    return lo, med


def rel(a, b):
    a, b = a.float(), b.float()
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def main() -> int:
    args = parse()
    b, h, s, d = (int(x) for x in args.shape.split(","))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    from torch.nn.attention import SDPBackend, sdpa_kernel

    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}; "
          f"B{b} H{h} S{s} D{d} bf16", flush=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    out = torch.empty_like(q)
    bad = False

    class Rows(list):
        def append(self, r):  # printed as measured: a run cut short still shows what it had
            super().append(r)
            tag, name, (lo, med), err, vt = r
            print(f"{tag:6} {name:34} min {lo:7.3f} med {med:7.3f} ms {flops / med / 1e9:6.1f} TFLOP/s "
                  f"of sdpa: min {base[0] / lo:5.3f} med {base[1] / med:5.3f}  err {err:.1e} vs-tri {vt:.1e}",
                  flush=True)

    rows = Rows()
    for causal in (False, True):
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        tag = "causal" if causal else "full"
        want = sdpa(q, k, v, is_causal=causal).float()
        base = timed(lambda: sdpa(q, k, v, is_causal=causal), args.rep)
        rows.append((tag, "sdpa (torch's pick)", base, 0.0, 0.0))
        for be in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
            try:
                with sdpa_kernel([be]):
                    t = timed(lambda: sdpa(q, k, v, is_causal=causal), args.rep)
                rows.append((tag, f"sdpa {be.name} alone", t, 0.0, 0.0))
            except RuntimeError as e:
                print(f"  {be.name}: {str(e).splitlines()[0][:80]}")
        tri = None
        if not args.no_triton:
            out.fill_(float("nan"))
            attention.attention(q, k, v, out, b, h, s, d, causal=causal, kernel="tma")
            tri = out.clone()
            best = attention.attention_tma_kernel.best_config
            t = timed(lambda: attention.attention(q, k, v, out, b, h, s, d, causal=causal, kernel="tma"), args.rep)
            rows.append((tag, f"triton [tma] {best.kwargs['BLOCK_M']}x{best.kwargs['BLOCK_N']} "
                              f"w{best.num_warps} s{best.num_stages}", t, rel(tri, want), 0.0))
        for c in args.configs.split(";"):
            cfg = tuple(int(x) for x in c.split(","))
            name = f"gluon {cfg[0]}x{cfg[1]} st{cfg[2]}{' early' if cfg[3] else ''}"
            try:
                out.fill_(float("nan"))
                flash_hopper.attention(q, k, v, out, b, h, s, d, causal, config=cfg)
                torch.cuda.synchronize()
            except Exception as e:  # a config that does not build or launch: say so, go on
                print(f"  {tag} {name}: {type(e).__name__}: {str(e).splitlines()[0][:160]}", flush=True)
                continue
            err = rel(out, want)
            vs_tri = rel(out, tri) if tri is not None else 0.0
            if not err <= 2e-2 or torch.isnan(out).any():
                print(f"  {tag} {name}: WRONG rel.err {err:.3e} vs triton {vs_tri:.3e}", flush=True)
                bad = True
                continue
            t = timed(lambda: flash_hopper.attention(q, k, v, out, b, h, s, d, causal, config=cfg), args.rep)
            rows.append((tag, name, t, err, vs_tri))
        again = timed(lambda: sdpa(q, k, v, is_causal=causal), args.rep)
        rows.append((tag, "sdpa again (drift)", again, 0.0, 0.0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
