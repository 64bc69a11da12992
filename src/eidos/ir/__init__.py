"""The plan IR: nodes, expressions, dtypes, schemas, typing, validation, JSON and rewrites. Engine-free."""
