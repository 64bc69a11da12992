"""A thread's state, as every target records it (the reference in its Thread objects, compiled targets
in per-thread rows between launches or rounds)."""

EXITED, RUNNING, AT_BARRIER, AT_COLLECTIVE, FAILED = 0, 1, 2, 3, 4

__all__ = ["EXITED", "RUNNING", "AT_BARRIER", "AT_COLLECTIVE", "FAILED"]
