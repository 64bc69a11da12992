"""Why the Triton target's reductions use the grid they do: variants of the generated map+sum kernel.

Run on the GPU machine:  python bench/gpu_reduce_grid.py [--log2n 28]

The kernel is the one arrays.py generates for `((x*2+1).exp()*y).sum()` over 2^log2n float32 (a
grid-stride loop, the map in registers, a double-double float64 sum per lane, one partial per
program). Each variant changes one thing, times the kernel alone (CUDA events, min and median of
15) and checks its partials against a float64 torch sum; the device copy (torch clone) and
torch.compile's map+sum are timed beside them as the floor and the bar:
- programs per SM (4 .. 256), elements per iteration (1024 .. 4096) and warps (4 .. 16);
- the loop: `while` (what arrays.py emits: Triton's interpreter cannot range() over a run-time
  bound), `for`, and `tl.range` software-pipelined over 3 stages;
- what the lane costs: float32 `exp` instead of float64, a plain float64 sum instead of double-double.
arrays.py's REDUCE_BLOCK, REDUCE_WARPS and PROGRAMS_PER_SM come from this run (bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import sys

from gpu_isa import Timer  # the same CUDA-event timing as the ISA benchmark (this folder is on sys.path)

BODY = '''
@triton.jit
def kernel(x1, x4, n, p, iters, pa, pb, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    lane = tl.arange(0, BLOCK)
    hi = tl.full([BLOCK], 0.0, tl.float64)
    lo = tl.full([BLOCK], 0.0, tl.float64)
    {loop}
        offs = (pid + (it - {first}) * p) * BLOCK + lane
        m = offs < n
        v1 = tl.load(x1 + offs, mask=m)
        v4 = tl.load(x4 + offs, mask=m)
        v0 = (v1 * 2.0)
        v0 = (v0 + 1.0)
        v0 = {exp}
        v0 = (v0 * v4)
        x = tl.where(m, v0.to(tl.float64), 0.0)
        {acc}
    ra, rb = tl.reduce((hi, lo), 0, _dd)
    tl.store(pa + pid, ra)
    tl.store(pb + pid, rb)
'''
LOOPS = {"while": ("it = 0\n    while it < iters:\n        it += 1", 1), "for": ("for it in range(0, iters):", 0),
         "tl.range(3)": ("for it in tl.range(0, iters, num_stages=3):", 0)}
EXPS = {"exp f64": "(_exp(v0.to(tl.float64))).to(tl.float32)", "exp f32": "libdevice.exp(v0)"}
ACCS = {"double-double": "hi, lo = _dd(hi, lo, x, 0.0)", "float64": "hi = hi + x"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2n", type=int, default=28)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this measures generated kernels on a GPU (bench/gpu_isa.py --smoke checks the logic here)")
    from eidos.isa.backends.triton import arrays
    from eidos.isa.backends.triton import compile as source

    n = 1 << args.log2n
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = (torch.rand(n, generator=gen) * 2 - 1).cuda()
    y = (torch.rand(n, generator=gen) * 2 - 1).cuda()
    want = float(((x.double() * 2 + 1).exp() * y.double()).sum())
    print(f"# map+sum kernel variants on {torch.cuda.get_device_name()} ({sms} SMs), 2^{args.log2n} float32; "
          "min / median of 15 (ms), CUDA events")

    timer = Timer(torch.device("cuda"))

    def timed(fn) -> tuple[float, float]:
        lo, med = timer(fn, 15)
        return lo * 1e3, med * 1e3

    rows = [("copy (torch clone; moves 2 GiB as map+sum reads 2 GiB)", timed(lambda: x.clone()), "")]
    compiled = torch.compile(lambda a, b: ((a * 2 + 1).exp() * b).sum())
    rows.append(("torch.compile map+sum", timed(lambda: compiled(x, y)), ""))

    def variant(loop="while", exp="exp f64", acc="double-double", block=2048, warps=8, per_sm=4):
        text, first = LOOPS[loop]
        src = arrays.header() + BODY.format(loop=text, first=first, exp=EXPS[exp], acc=ACCS[acc])
        kernel = source.load(src, "kernel")
        tiles = -(-n // block)
        p = min(tiles, per_sm * sms)
        iters = -(-tiles // p)
        pa = torch.empty(p, dtype=torch.float64, device="cuda")
        pb = torch.empty_like(pa)

        def run():
            kernel[(p,)](x, y, n, p, iters, pa, pb, BLOCK=block, num_warps=warps, enable_fp_fusion=False)
        t = timed(run)
        err = abs(float(pa.sum() + pb.sum()) - want) / abs(want)
        rows.append((f"{loop}, {exp}, {acc}, {per_sm}/SM x {block} x {warps} warps", t,
                     "" if err < 1e-6 else f"WRONG: relative error {err:.1e}"))

    variant()  # the grid before this run: one wave of 4 large programs per SM
    for per_sm in (8, 16, 32, 64, 256):
        variant(per_sm=per_sm)
    for loop in ("for", "tl.range(3)"):
        variant(loop=loop)
    variant(exp="exp f32")
    variant(acc="float64")
    for per_sm in (16, 64):
        for block, warps in ((1024, 4), (2048, 4), (4096, 8)):
            variant(per_sm=per_sm, block=block, warps=warps)
    print(f"{'variant':64} {'min':>8} {'median':>8}  of copy")
    copy = rows[0][1][0]
    for name, (lo, med), note in rows:
        print(f"{name:64} {lo:8.3f} {med:8.3f}  {copy / lo:6.2f} {note}")
    return 1 if any(note for *_, note in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
