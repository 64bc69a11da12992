"""The Array API standard's own conformance suite (data-apis/array-api-tests, pinned) against eidos.array_api.

It runs in a subprocess on a copy of the pinned checkout beside the repository (EIDOS_ARRAY_API_TESTS names
another folder), at a fixed example count and seed, and fails when a test fails
that is not on array_api_suite/shared_failures.json: the failures array-api-strict (the standard's reference
namespace) has too on the same suite version and settings, each with its reason. Deselect it with
`-m "not array_api_suite"`. Hypothesis runs without shrinking (array_api_suite/eidos_suite_settings.py): rerun
a failing test alone in the suite to see its smallest example.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import eidos

HERE = Path(__file__).parent / "array_api_suite"
ROOT = Path(__file__).resolve().parents[2]
SUITE = Path(os.environ.get("EIDOS_ARRAY_API_TESTS", ROOT.parent / "shared" / "array-api-tests"))
VERSION = "2024.12"
MAX_EXAMPLES = 5
SEED = 0   # with PYTHONHASHSEED=0: the examples the suite draws depend on the hash seed too

pytestmark = pytest.mark.array_api_suite


def shared_failures() -> dict[str, str]:
    """{test id: why array-api-strict fails it too} from the checked-in list."""
    return {e["test"]: e["reason"] for e in json.loads((HERE / "shared_failures.json").read_text())["failures"]}


def test_shared_failures_list_gives_a_reason_for_each():
    entries = json.loads((HERE / "shared_failures.json").read_text())["failures"]
    assert len({e["test"] for e in entries}) == len(entries)
    assert all(e["test"].startswith("array_api_tests/") and e["reason"].strip() for e in entries)


def run_suite(tmp_path: Path, module: str) -> dict[str, str]:
    """{test id: outcome} of one run of the suite on `module`."""
    for need in ("hypothesis", "ndindex", "pytest_jsonreport"):
        pytest.importorskip(need, reason=f"the Array API suite needs {need} (the test extra installs it)")
    copy = tmp_path / "suite"   # a copy: pytest and Hypothesis write caches next to the tests
    shutil.copytree(SUITE, copy, ignore=shutil.ignore_patterns(".git", ".hypothesis", "__pycache__"))
    env = dict(os.environ, ARRAY_API_TESTS_MODULE=module, ARRAY_API_TESTS_VERSION=VERSION, PYTHONHASHSEED="0",
               PYTHONPATH=os.pathsep.join([str(Path(eidos.__file__).parents[1]), str(HERE)]))
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", "array_api_tests", "-q", "-p", "no:cacheprovider", "-p",
           "eidos_suite_settings", "-o", "addopts=", f"--max-examples={MAX_EXAMPLES}", f"--hypothesis-seed={SEED}",
           "--disable-deadline", "--json-report", f"--json-report-file={report}", "--tb=line"]
    done = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=1200)
    if not report.exists():
        pytest.fail(f"the Array API suite did not run (exit {done.returncode}):\n{done.stdout[-3000:]}"
                    f"\n{done.stderr[-3000:]}")
    return {t["nodeid"]: t["outcome"] for t in json.loads(report.read_text())["tests"]}


@pytest.mark.skipif(not SUITE.is_dir(), reason=f"the pinned Array API suite is not at {SUITE} "
                    "(set EIDOS_ARRAY_API_TESTS to its folder)")
def test_array_api_suite_fails_only_where_array_api_strict_does(tmp_path):
    outcomes = run_suite(tmp_path, "eidos.array_api")
    known = shared_failures()
    failed = sorted(t for t, o in outcomes.items() if o in ("failed", "error"))
    new = [t for t in failed if t not in known]
    assert len(outcomes) > 1000, f"the suite ran only {len(outcomes)} tests"
    assert not new, (f"{len(new)} Array API suite test(s) fail on eidos and are not shared failures of "
                     "array-api-strict:\n" + "\n".join(new))
    fixed = sorted(t for t in known if outcomes.get(t) == "passed")
    if fixed:   # not an error: the list is what strict shares; an entry eidos now passes can go
        warnings.warn(f"shared_failures.json lists {len(fixed)} test(s) eidos now passes: {fixed}", stacklevel=1)
