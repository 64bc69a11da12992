"""An out-of-tree lane and kernel target (tests/data/thirdparty_pkg) join eidos by being installed:
the registries list them and the shared cross-lane and instruction suites run on them."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tests" / "data" / "thirdparty_pkg"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """The environment of a process where the package is installed: its distribution metadata (name,
    version, the entry points its pyproject declares) in a folder on the path, as pip would leave it."""
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    site = tmp_path_factory.mktemp("site")
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in eps.items()) + "\n"
        for group, eps in project["entry-points"].items()))
    path = [str(site), str(PACKAGE / "src"), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)


def test_the_registries_find_the_installed_lane_and_target(installed):
    code = """
import eidos as ei
from eidos.isa import registry
from eidos.tensor import backend, explain
lanes = {b.name: b for b in ei.backends()}
assert lanes["outoftree"].available and lanes["outoftree"].kind == "reference", lanes
assert registry.info("outoftree").available, registry.targets()
assert backend.backends()["outoftree"]["available"] and "outoftree" in backend.get_backend_priority()
backend.set_backend("outoftree")
t = ei.tensor([1.0, 2.0]) + ei.tensor([3.0, 4.0])
assert t.numpy().tolist() == [4.0, 6.0]
assert "backend: outoftree (explicit backend)" in explain(t), explain(t)
print(ei.from_pydict({"a": [1, 2]}).select(b=ei.col("a") * 2).run(engine="outoftree").column("b").to_pylist())
"""
    done = run(installed, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[2, 4]"


def test_the_shared_suites_run_on_the_installed_lane_and_target(installed):
    suites = ["tests/lanes/test_cross_lane.py", "tests/isa/test_arrays.py", "tests/isa/test_memory.py"]
    done = run(installed, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "no:warnings",
               "-rs", *suites, "-k", "outoftree and (hand_written or value_errors or parallel_map or misuse)")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert "passed" in summary and "failed" not in summary and "error" not in summary, summary
    passed = int(summary.split(" passed")[0].split()[-1])
    assert passed >= 200, summary  # both the lane's cases and the target's instruction cases ran
