"""The shared cross-lane suite."""
