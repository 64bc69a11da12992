"""How many lanes a program runs on, and what else a launch carries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from eidos.errors import IsaError

MAX_BLOCK_THREADS = 1024


def _largest_divisor_at_most(n: int, limit: int) -> int:
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


@dataclass(frozen=True)
class LaunchConfig:
    """grid x block lanes; shared_memory bytes of shared memory per block."""

    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    shared_memory: int = 0

    def __post_init__(self) -> None:
        for name in ("grid", "block"):
            dims = tuple(int(d) for d in getattr(self, name))
            if len(dims) != 3 or min(dims) < 0 or (name == "block" and min(dims) < 1):
                raise IsaError(f"LaunchConfig: {name} must be three {'positive' if name == 'block' else 'non-negative'} ints, got {getattr(self, name)!r}")
            object.__setattr__(self, name, dims)
        if self.block_threads() > MAX_BLOCK_THREADS:
            raise IsaError(f"LaunchConfig: block of {self.block_threads()} lanes exceeds {MAX_BLOCK_THREADS}")
        if int(self.shared_memory) < 0:
            raise IsaError(f"LaunchConfig: shared_memory must be >= 0, got {self.shared_memory}")
        object.__setattr__(self, "shared_memory", int(self.shared_memory))

    @classmethod
    def linear(cls, total_threads: int, shared_memory: int = 0) -> LaunchConfig:
        """Exactly total_threads lanes: blocks of the largest divisor <= 256."""
        total = int(total_threads)
        if total < 0:
            raise IsaError(f"LaunchConfig.linear: total_threads must be >= 0, got {total}")
        if total == 0:
            return cls((0, 1, 1), (1, 1, 1), shared_memory)
        b = _largest_divisor_at_most(total, 256)
        return cls((total // b, 1, 1), (b, 1, 1), shared_memory)

    @classmethod
    def grid_2d(cls, width: int, height: int, shared_memory: int = 0) -> LaunchConfig:
        """Exactly width x height lanes, x fastest, in blocks of at most 16 x 16."""
        w, h = int(width), int(height)
        if w < 1 or h < 1:
            raise IsaError(f"LaunchConfig.grid_2d: width and height must be >= 1, got {w} x {h}")
        bx, by = _largest_divisor_at_most(w, 16), _largest_divisor_at_most(h, 16)
        return cls((w // bx, h // by, 1), (bx, by, 1), shared_memory)

    def block_threads(self) -> int:
        x, y, z = self.block
        return x * y * z

    def num_blocks(self) -> int:
        x, y, z = self.grid
        return x * y * z

    def total_threads(self) -> int:
        return self.num_blocks() * self.block_threads()


@dataclass(frozen=True)
class ExecutionParams:
    """A launch plus the initial register values every lane starts with (kernel arguments)."""

    config: LaunchConfig = field(default_factory=LaunchConfig)
    registers: Mapping[int, int | float] = field(default_factory=dict)
