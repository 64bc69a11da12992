"""A row-wise plan part split by rows over the GPUs of this host: each GPU runs the part on its slice of the
rows (one thread and one kernel target per GPU, launched side by side; slices on host targets run one
after another), and the slices' results are joined
in row order. Row-wise means Filter and Project over one Scan: every output row depends on its input row
only, so the split gives the unsplit result. Parts with an Aggregate, Sort, Limit, Distinct, Join or Union
run on one GPU.
"""

from __future__ import annotations

import dataclasses
import os
import threading

import pyarrow as pa

from eidos.hal.arrow import read_local
from eidos.ir import nodes as N
from eidos.ir.sources import ArrowSource

GPUS_ENV = "EIDOS_TRITON_GPUS"   # the most GPUs one part is split over (default: every visible one)
MIN_ROWS = 1 << 22               # below this one GPU's launch beats the split's set-up


def rowwise(plan: N.Node) -> bool:
    return all(isinstance(n, (N.Scan, N.Filter, N.Project)) for n in plan.walk()) and \
        sum(isinstance(n, N.Scan) for n in plan.walk()) == 1


def gpus() -> int:
    """GPUs a part may be split over: the visible ones, at most EIDOS_TRITON_GPUS."""
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    cap = os.environ.get(GPUS_ENV, "").strip()
    return min(n, int(cap)) if cap.isdigit() else n


def _on(node: N.Node, scan: N.Scan, table: pa.Table) -> N.Node:
    """The plan with its scan reading `table` (a slice of the scan's rows) instead."""
    if node is scan:
        return N.Scan(ArrowSource.of(table, scan.schema), scan.columns)
    return dataclasses.replace(node, input=_on(node.input, scan, table))


def execute(plan: N.Node, devices: list, run) -> pa.Table:
    """run(plan on a slice, device) on each device in its own thread; the results concatenated in order."""
    scan = next(n for n in plan.walk() if isinstance(n, N.Scan))
    table = read_local(scan.source, scan.columns)
    k = len(devices)
    cuts = [table.num_rows * i // k for i in range(k + 1)]
    results: list = [None] * k
    errors: list = [None] * k

    def one(i):
        try:
            dev = devices[i]
            if dev.device.type == "cuda":   # this thread's kernels launch on the slice's GPU
                dev.torch.cuda.set_device(dev.device)
            results[i] = run(_on(plan, scan, table.slice(cuts[i], cuts[i + 1] - cuts[i])), dev)
        except BaseException as e:  # noqa: BLE001 - raised in the caller's thread
            errors[i] = e

    if all(d.device.type == "cuda" for d in devices):   # side by side, one thread a GPU
        threads = [threading.Thread(target=one, args=(i,), name=f"eidos-triton-gpu-{i}") for i in range(k)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:   # host targets (and Triton's interpreter, which is not thread-safe): one after another
        for i in range(k):
            one(i)
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return pa.concat_tables(results)
