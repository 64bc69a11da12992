"""The hardware abstraction layer: the Lane protocol, registry, devices, planner and runner."""
