"""examples/isa_quickstart.py runs as a new user would run it, on both backends, and its figures agree."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "isa_quickstart.py"


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_quickstart_builds_optimizes_runs_and_streams(backend, capsys):
    if backend == "cpu":
        pytest.importorskip("numba", reason="the compiled CPU backend's fast path needs numba")
    spec = importlib.util.spec_from_file_location("isa_quickstart", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(backend)
    out = capsys.readouterr().out
    assert "FusedMap" in out
    assert "relu(a + b)[95:105] = [185. 188. 191." in out
    streamed = re.search(r"streamed ([\d,]+) bytes .* sum\(relu\(x\)\) = ([\d.]+) \(NumPy: ([\d.]+)\)", out)
    assert streamed and streamed.group(1) == "4,194,304"
    assert streamed.group(2) == streamed.group(3)
