#!/usr/bin/env bash
# Prepares a GPU machine that cannot reach a package index (the project's H100/H200 machines):
# torch, triton, numpy, pyarrow, numba are already there; the rest of what eidos needs comes as
# wheels carried next to the checkout, then eidos itself is installed (its entry points name the
# lanes and kernel targets). Make the wheels on a connected machine, for the GPU machine's Python:
#   pip download -d .whl --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 --no-deps blake3 array-api-strict sqlglot cloudpickle
#   pip download -d .whl-polars (same flags) polars polars-runtime-32   # only for bench/gpu_flow.py
set -euo pipefail
cd "$(dirname "$0")/.."
links=(--find-links .whl)
want=(blake3 array-api-strict sqlglot cloudpickle)
if [ -d .whl-polars ]; then links+=(--find-links .whl-polars); want+=(polars); fi
python3 -m pip install -q --no-index "${links[@]}" "${want[@]}"
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e .
python3 -c "import eidos, torch, triton; print('eidos ready:', torch.cuda.get_device_name(), 'triton', triton.__version__)"
