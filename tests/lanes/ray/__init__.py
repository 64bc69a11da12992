"""The cluster lane's own tests (the cross-lane suite and TPC-H run it too)."""
