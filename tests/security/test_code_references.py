"""Code a plan names: loading, explaining or running a plan never imports or calls anything the
loading process has not allowed (a registered function, or a function of a trusted module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import eidos as ei
from eidos import col
from eidos.cli import main
from eidos.errors import PlanError
from eidos.hal import trust
from tests.data import trusted_udfs

ROOT = Path(__file__).resolve().parents[2]
MARKER_MODULE = "tests.data.import_marker"


@ei.register_udf
def placeholder(x):
    return x


def udf_plan(ref: str, dtype: str = "Int64") -> str:
    """A real plan whose udf column names `ref`."""
    flow = ei.from_pydict({"a": [1, None, 3], "s": ["x", "y", None]}).with_columns(b=ei.udf(placeholder, ei.Int64)("a"))
    doc = json.loads(flow.to_json())
    udf = doc["plan"]["columns"][2][1]
    udf["udf"], udf["dtype"] = ref, dtype
    if dtype == "String":
        udf["args"] = [{"col": "s"}]
    return json.dumps(doc)


def map_batches_plan(ref: str) -> str:
    """A real plan whose map_batches step names `ref`."""
    doc = json.loads(ei.from_pydict({"a": [1, 2]}).map_batches(placeholder, schema={"a": ei.Int64}).to_json())
    doc["plan"]["fn"] = ref
    return json.dumps(doc)


@pytest.fixture
def marker(tmp_path, monkeypatch):
    """The file tests.data.import_marker writes when imported; the module forgotten for the test."""
    path = tmp_path / "imported"
    monkeypatch.setenv("EIDOS_IMPORT_MARKER", str(path))
    monkeypatch.delitem(sys.modules, MARKER_MODULE, raising=False)
    return path


@pytest.fixture
def calls(monkeypatch):
    """os.system and subprocess.run replaced by recorders: nothing may call them. (Not exec and eval:
    libraries call those while importing; that a plan cannot reach them is the PlanError itself.)"""
    seen: list[str] = []
    for owner, name in [(os, "system"), (subprocess, "run")]:
        monkeypatch.setattr(owner, name, lambda *a, _n=name, **k: seen.append(_n))
    return seen


# ---------------------------------------------------------------- what a plan may not name


@pytest.mark.parametrize("ref, module", [
    ("os:system", "os"), ("posix:system", "posix"), ("builtins:exec", "builtins"), ("builtins:eval", "builtins"),
    ("subprocess:run", "subprocess"), ("os.path:join", "os.path"), ("builtins:__import__", "builtins"),
])
def test_an_unallowed_udf_is_refused_naming_it_and_how_to_allow_it(ref, module, calls):
    with pytest.raises(PlanError) as info:
        ei.Flow.from_json(udf_plan(ref))
    message = str(info.value)
    assert f"plan JSON at plan.columns[2][1].udf: the plan names function {ref!r}" in message
    assert f"{module!r} is part of Python's standard library" in message and "ei.register_udf(fn)" in message
    assert "trusted_modules=" not in message and "--trust" not in message   # never offered for the stdlib
    assert calls == []


@pytest.mark.parametrize("ref", ["subprocess:run", "os:system", "builtins:exec"])
def test_an_unallowed_map_batches_function_is_refused(ref, calls):
    with pytest.raises(PlanError, match=rf"plan JSON at plan\.fn: the plan names function '{ref}'"):
        ei.Flow.from_json(map_batches_plan(ref))
    assert calls == []


def test_a_module_with_side_effects_is_never_imported(marker):
    for text in (udf_plan(f"{MARKER_MODULE}:shout", "String"), map_batches_plan(f"{MARKER_MODULE}:shout")):
        with pytest.raises(PlanError, match=f"--trust {MARKER_MODULE}"):
            ei.Flow.from_json(text)
        with pytest.raises(PlanError):  # a trusted parent of a different name allows nothing here
            ei.Flow.from_json(text, trusted_modules=("tests.dat", "tests.data.import"))
    assert MARKER_MODULE not in sys.modules
    assert not marker.exists()


def test_the_marker_module_is_imported_when_trusted(marker):
    """The control: the marker does show an import, so its absence above means something."""
    flow = ei.Flow.from_json(udf_plan(f"{MARKER_MODULE}:shout", "String"), trusted_modules=("tests.data",))
    assert marker.read_text() == "imported\n"
    assert flow.run(engine="reference").column("b").to_pylist() == ["X", "Y", None]


@pytest.mark.parametrize("command", ["explain", "run"])
def test_the_command_imports_nothing_untrusted(command, marker, tmp_path, capsys, calls):
    for i, text in enumerate([udf_plan(f"{MARKER_MODULE}:shout", "String"), udf_plan("os:system")]):
        path = tmp_path / f"plan{i}.json"
        path.write_text(text)
        assert main([command, str(path)]) == 1
        _, err = capsys.readouterr()
        assert err.startswith("error: ") and "ei.register_udf(fn)" in err and "Traceback" not in err
        assert ("--trust " in err) == (i == 0)   # trusting the standard library is never offered
    assert MARKER_MODULE not in sys.modules and not marker.exists() and calls == []


@pytest.mark.parametrize("ref, words", [
    ("tests.data.trusted_udfs:os.system", "modules are named before the ':'"),
    ("tests.data.trusted_udfs:system", "defined in 'posix', outside the trusted modules"),
    ("tests.data.trusted_udfs:launch", "defined in 'subprocess', outside the trusted modules"),
    ("tests.data.trusted_udfs:__builtins__.exec", "without dunder parts"),
    ("tests.data.trusted_udfs:double.__globals__", "without dunder parts"),
    ("tests.data.trusted_udfs:ei.udf", "modules are named before the ':'"),
    ("tests.data.trusted_udfs:nothing", "its module does not define"),
    ("tests.data.no_such_module:f", "its trusted module does not import"),
    ("tests.data.trusted_udfs", "not registered"),
])
def test_a_trusted_module_allows_only_what_it_defines(ref, words, calls):
    with pytest.raises(PlanError, match=words):
        ei.Flow.from_json(udf_plan(ref), trusted_modules=("tests.data",))
    assert calls == []


def test_trusting_os_does_not_reach_what_os_path_imports(calls):
    with pytest.raises(PlanError, match="defined in 'posixpath', outside the trusted modules"):
        ei.Flow.from_json(udf_plan("os.path:join", "String"), trusted_modules=("os",))
    with pytest.raises(PlanError, match="modules are named before the ':'"):
        ei.Flow.from_json(udf_plan("os:path.join", "String"), trusted_modules=("os",))


@pytest.mark.parametrize("bad, words", [
    ("os", "takes a tuple of module names, got the str 'os'"),
    (["*"], "module names such as 'mypkg'"),
    ([""], "module names such as 'mypkg'"),
    (["os.*"], "module names such as 'mypkg'"),
    ([7], "module names such as 'mypkg'"),
])
def test_trusted_modules_are_names_without_wildcards(bad, words):
    with pytest.raises(PlanError, match=words):
        ei.Flow.from_json(udf_plan("os:system"), trusted_modules=bad)


def test_a_registered_name_shadows_nothing_it_was_not_given():
    """A function name that is registered resolves to the registered function, never by import."""
    fn = trust.Trust().resolve("tests.security.test_code_references:placeholder")
    assert fn is placeholder


# ---------------------------------------------------------------- what a plan may name


def test_a_registered_function_round_trips_and_runs():
    flow = ei.from_pydict({"a": [1, None, 3]}).with_columns(b=trusted_udfs.plus_one("a"))
    text = flow.to_json()
    assert '"udf": "tests.data.trusted_udfs:plus_one"' in text
    back = ei.Flow.from_json(text)
    assert back.plan == flow.plan
    assert back.run(engine="reference").to_pydict() == {"a": [1, None, 3], "b": [2, None, 4]}


def test_register_udf_under_a_name_stores_that_name():
    def local_shift(x):  # a nested function: only an explicit name makes it nameable
        return None if x is None else x - 1

    with pytest.raises(PlanError, match="has no module-level name"):
        ei.register_udf(local_shift)
    assert ei.register_udf(local_shift, name="security-tests:shift") is local_shift
    flow = ei.from_pydict({"a": [5]}).select(b=ei.udf(local_shift, ei.Int64)("a"))
    assert '"udf": "security-tests:shift"' in flow.to_json()
    assert ei.Flow.from_json(flow.to_json()).run(engine="reference").to_pydict() == {"b": [4]}


def test_a_lambda_needs_a_name():
    square = lambda x: None if x is None else x * x  # noqa: E731 - the case under test
    flow = ei.from_pydict({"a": [3]}).select(b=ei.udf(square, ei.Int64)("a"))
    with pytest.raises(PlanError, match=r"has no importable name .*ei.register_udf\(fn, name="):
        flow.to_json()
    ei.register_udf(square, name="security-tests:square")
    assert ei.Flow.from_json(flow.to_json()).run(engine="reference").to_pydict() == {"b": [9]}


def test_the_decorator_registers_under_an_explicit_name_and_builds_expressions():
    @ei.udf(ei.String, name="security-tests:upper")
    def upper(s):
        return None if s is None else s.upper()

    assert upper.fn("x") == "X" and upper.return_dtype == ei.String
    flow = ei.from_pydict({"s": ["a", None]}).select(t=upper(col("s")))
    assert json.loads(flow.to_json())["plan"]["columns"][0][1]["udf"] == "security-tests:upper"
    assert ei.Flow.from_json(flow.to_json()).run(engine="reference").to_pydict() == {"t": ["A", None]}


def test_udf_without_a_dtype_says_how_to_write_it():
    with pytest.raises(PlanError, match=r"needs the dtype the function returns: ei.udf\(fn, ei.Float64\)"):
        ei.udf(placeholder)


def test_a_registered_map_batches_function_round_trips():
    ei.register_udf(trusted_udfs.negate_batch, name="security-tests:negate")
    flow = ei.from_pydict({"a": [1, 2]}).map_batches(trusted_udfs.negate_batch, schema={"a": ei.Int64})
    assert ei.Flow.from_json(flow.to_json()).run(engine="reference").to_pydict() == {"a": [-1, -2]}


def test_trusted_modules_allow_a_module_and_its_submodules():
    ref = "tests.data.trusted_udfs:double"
    for trusted in [("tests.data.trusted_udfs",), ("tests.data",), ("tests",), ("zzz", "tests.data")]:
        flow = ei.Flow.from_json(udf_plan(ref), trusted_modules=trusted)
        assert flow.run(engine="reference").column("b").to_pylist() == [2, None, 6]
    flow = ei.Flow.from_json(udf_plan("tests.data.trusted_udfs:Scale.triple"), trusted_modules=("tests.data",))
    assert flow.run(engine="reference").column("b").to_pylist() == [3, None, 9]


def test_a_trusted_decorated_function_resolves_to_the_function():
    fn = trust.Trust.of(["tests.data"]).resolve("tests.data.trusted_udfs:plus_one")
    assert fn is trusted_udfs.plus_one.fn


def test_the_command_line_flag_allows_a_module(tmp_path, capsys, marker):
    path = tmp_path / "plan.json"
    path.write_text(udf_plan(f"{MARKER_MODULE}:shout", "String"))
    assert main(["explain", str(path), "--trust", "nothing.here", "--trust", MARKER_MODULE]) == 0
    assert "udf:shout(s)" in capsys.readouterr().out
    assert main(["run", str(path), "--trust", "tests.data", "--engine", "reference"]) == 0
    assert "X" in capsys.readouterr().out and marker.exists()


def test_another_process_needs_registration_or_trust(tmp_path):
    """A plan stores the registered name; another process loads it only after registering the
    function (here by importing the module that registers it) or trusting its module."""
    path = tmp_path / "plan.json"
    path.write_text(ei.from_pydict({"a": [1, 2]}).select(b=trusted_udfs.plus_one("a")).to_json())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    env.pop("EIDOS_BACKEND", None)
    script = ("import sys, eidos as ei\n"
              "text = open(sys.argv[1]).read()\n"
              "try:\n    ei.Flow.from_json(text)\nexcept ei.errors.PlanError as e:\n    print('refused:', e)\n"
              "import tests.data.trusted_udfs\n"
              "print(ei.Flow.from_json(text).run(engine='reference').to_pydict())\n")
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120, check=True).stdout
    assert "refused: plan JSON at plan.columns[0][1].udf: the plan names function " \
           "'tests.data.trusted_udfs:plus_one'" in out
    assert out.rstrip().endswith("{'b': [2, 3]}")
    cli = subprocess.run([sys.executable, "-m", "eidos", "run", str(path), "--trust", "tests.data"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert "2 rows" in cli.stdout or "rows" in cli.stdout


# ---------------------------------------------------------------- registration


def test_registering_again_is_harmless_and_a_taken_name_is_an_error():
    def one(x):
        return 1

    def two(x):
        return 2

    ei.register_udf(one, name="security-tests:taken")
    ei.register_udf(one, name="security-tests:taken")
    with pytest.raises(PlanError, match="already registered .* pass replace=True"):
        ei.register_udf(two, name="security-tests:taken")
    with pytest.raises(PlanError, match="already registered"):
        ei.udf(ei.Int64, name="security-tests:taken")(two)
    ei.register_udf(two, name="security-tests:taken", replace=True)
    assert trust.registered("security-tests:taken") is two
    assert trust.name_of(two, "udf function") == "security-tests:taken"
    with pytest.raises(PlanError, match="no importable name"):  # `one` lost its only name
        trust.name_of(one, "udf function")
    trust.unregister_udf("security-tests:taken")
    assert trust.registered("security-tests:taken") is None


@pytest.mark.parametrize("bad", [None, 3, "not a function"])
def test_register_udf_takes_a_function(bad):
    with pytest.raises(PlanError, match="takes a function"):
        ei.register_udf(bad)


def test_bound_methods_are_found_by_equality():
    class Counter:
        def bump(self, x):
            return x

    c = Counter()
    ei.register_udf(c.bump, name="security-tests:bump")
    assert trust.name_of(c.bump, "udf function") == "security-tests:bump"  # a new bound method each access
    trust.unregister_udf("security-tests:bump")


def test_registration_is_thread_safe():
    fns = [(lambda x, _i=i: _i) for i in range(64)]
    errors: list[Exception] = []
    barrier = threading.Barrier(8)

    def work(k: int) -> None:
        barrier.wait()
        for i in range(k, 64, 8):
            ei.register_udf(fns[i], name=f"security-tests:t{i}")
        for i in range(64):  # the same name for different functions: only one may win
            try:
                ei.register_udf(fns[i], name="security-tests:race")
            except PlanError as e:
                errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(trust.registered(f"security-tests:t{i}") is fns[i] for i in range(64))
    winner = trust.registered("security-tests:race")
    assert winner in fns and len(errors) == 8 * 64 - 8
    for i in range(64):
        trust.unregister_udf(f"security-tests:t{i}")
    trust.unregister_udf("security-tests:race")


def test_a_name_that_is_no_module_is_not_echoed_unquoted():
    ref = "\x1b[2J\nrm -rf x:f"
    with pytest.raises(PlanError) as info:
        ei.Flow.from_json(udf_plan(ref))
    message = str(info.value)
    assert "\x1b" not in message and "\n" not in message
    assert "trusted_modules=('mypkg',)" in message and "--trust MODULE" in message
