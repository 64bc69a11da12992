"""stream(): run a program over an input of any size through one fixed backend pool."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from eidos.errors import BackendError

from .launch import LaunchConfig


def _chunks(source, size: int):
    """Slices of at most `size` bytes; arrays and bytes-likes are sliced without copying,
    iterables of chunks are re-cut through one staging buffer of `size` bytes."""
    if isinstance(source, np.ndarray):
        source = np.ascontiguousarray(source).reshape(-1).view(np.uint8)
    try:
        mv = memoryview(source).cast("B")
    except TypeError:
        mv = None
    if mv is not None:
        for start in range(0, len(mv), size):
            yield mv[start:start + size]
        return
    stage, filled = bytearray(size), 0
    for piece in source:
        piece = memoryview(piece if not isinstance(piece, np.ndarray) else np.ascontiguousarray(piece).view(np.uint8)).cast("B")
        while len(piece):
            take = min(size - filled, len(piece))
            stage[filled:filled + take] = piece[:take]
            filled, piece = filled + take, piece[take:]
            if filled == size:
                yield memoryview(stage)
                filled = 0
    if filled:
        yield memoryview(stage)[:filled]


def stream(backend, source, kernel: Callable[[int, int], object], *, pool_bytes: int,
           config: LaunchConfig | Callable[[int], LaunchConfig] | None = None,
           sink: Callable[[int, int], None] | None = None) -> int:
    """Copy `source` chunk by chunk into one pool of pool_bytes bytes and run a program on each.

    kernel(pool, nbytes) builds the program for a chunk of nbytes held at the start of pool
    (built once per distinct size: at most the full size and the last, shorter one);
    sink(pool, nbytes), when given, takes each chunk's results before the next chunk lands.
    Peak memory is the pool (plus one staging buffer for iterables), whatever the input size.
    Returns the number of bytes streamed.
    """
    if isinstance(pool_bytes, bool) or not isinstance(pool_bytes, int) or pool_bytes < 1:
        raise BackendError(f"stream: pool_bytes must be a positive int, got {pool_bytes!r}")
    pool = backend.allocate_pool(pool_bytes)
    programs: dict[int, object] = {}
    total = 0
    try:
        for chunk in _chunks(source, pool_bytes):
            n = len(chunk)
            backend.copy_to_pool(pool, 0, chunk)
            program = programs.get(n)
            if program is None:
                program = programs[n] = kernel(pool, n)
            cfg = config(n) if callable(config) else (config or LaunchConfig.linear(1))
            backend.execute_program(program, cfg)
            if sink is not None:
                sink(pool, n)
            total += n
    finally:
        backend.free_pool(pool)
    return total
