"""The hardware abstraction layer: the Backend protocol, registry, devices, planner and runner."""
