"""The extension kernels compile for Hopper (sm_90) through Triton's real pipeline, with no GPU.

The interpreter checks what the kernels compute but never compiles them; this builds the large
Hopper variants (the autotuner's 128x256 GEMM tiles, 128x128 attention tiles with and without TMA,
4096-wide softmax rows) to cubins, checks the PTX uses wgmma and TMA where it should and that no
variant spills registers (ptxas -v). It runs
in a subprocess because kernels defined for the interpreter (TRITON_INTERPRET=1) cannot compile.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest


def test_hopper_variants_compile_to_cubins():
    triton = pytest.importorskip("triton")
    ptxas = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if not ptxas.exists():
        pytest.skip(f"no ptxas in this triton ({ptxas}); the NVIDIA backend cannot build cubins here")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-m", "eidos.isa.backends.triton.kernels.build", "--quick", "--strict"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "compiled for sm_90" in run.stdout
