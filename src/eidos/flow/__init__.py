"""The user's side of a plan: Flow, expression builders, sources and sinks. Builds IR; runs nothing."""
