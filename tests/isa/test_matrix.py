"""The speed matrix (eidos.isa.matrix, bench/matrix.py): every kind runs on the registered targets,
a cell is a timing of this run or the reason there is none, and the result says where it was taken."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from eidos.isa import matrix, registry
from eidos.isa.backends.reference import ReferenceBackend


class Elsewhere(ReferenceBackend):
    name = "elsewhere"


def unavailable_reason():
    """The availability probe of Elsewhere's module: it never runs here."""
    return "needs the machine next door"


@pytest.fixture
def elsewhere():
    registry.register_target("elsewhere", Elsewhere)
    yield
    registry.unregister_target("elsewhere")


def test_every_kind_is_timed_on_the_reference_and_unavailable_targets_say_why(elsewhere):
    result = matrix.measure((16, 64), 1, targets=["reference", "elsewhere"], reference_max=16, command="test")
    cells = {(c["kind"], c["size"], c["target"]): c for c in result["cells"]}
    assert len(cells) == len(matrix.KINDS) * 2 * 2
    for kind in matrix.KINDS:
        timed = cells[(kind, 16, "reference")]
        assert 0 < timed["min_s"] <= timed["median_s"] and timed["gbps"] > 0
        assert ("gflops" in timed) == (kind == "gemm")
        assert cells[(kind, 64, "reference")]["skipped"] == "the reference interpreter is timed up to 16 elements"
        assert cells[(kind, 16, "elsewhere")]["skipped"] == "unavailable: needs the machine next door"
    assert result["command"] == "test" and result["machine"]["cpu_cores"] >= 1
    headers, rows = matrix.table(result)
    assert headers == ["operation", "elements", "reference", "elsewhere"]
    assert [r[:2] for r in rows[:2]] == [["map", "16"], ["map", "64"]]
    assert rows[0][2].endswith("GB/s)") and rows[1][2] == "-" and rows[0][3] == "-"
    lines = matrix.provenance(result)
    assert lines[0].startswith(f"measured {result['date']} on ")
    assert "elsewhere: not measured, unavailable: needs the machine next door" in lines
    assert "reference: the reference interpreter is timed up to 16 elements" in lines


def test_save_and_load_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("EIDOS_CACHE_DIR", str(tmp_path))
    assert matrix.default_path() == tmp_path / "matrix.json" and matrix.load() is None
    result = matrix.measure((16,), 1, kinds=["binary map"], targets=["reference"])
    assert matrix.save(result) == tmp_path / "matrix.json"
    assert matrix.load() == result


def test_bench_writes_the_docs_page(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_matrix", Path(__file__).resolve().parents[2] / "bench" / "matrix.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "DOCS", tmp_path / "matrix.md")
    assert bench.main(["--sizes", "16", "--repeats", "1", "--targets", "reference", "--kinds", "reduction",
                       "--out", str(tmp_path / "m.json"), "--write-docs"]) == 0
    page = (tmp_path / "matrix.md").read_text()
    assert "python bench/matrix.py --sizes 16 --repeats 1 --targets reference" in page
    assert "| operation | elements | reference |" in page and "| reduction | 16 | " in page
    assert matrix.load(tmp_path / "m.json")["cells"][0]["target"] == "reference"
