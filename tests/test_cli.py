"""The `eidos` command: every subcommand, --help, error exits, and the entry points."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

import eidos as ei
from eidos.cli import main
from eidos.errors import ExecutionError
from eidos.hal import registry
from eidos.hal.lane import Backend

ROOT = Path(__file__).resolve().parents[1]
EIDOS = Path(sys.executable).with_name("eidos")
ANSI = re.compile(r"\x1b\[")


@pytest.fixture(autouse=True)
def plain_output(monkeypatch):
    """Tests read plain text: no colour forced by the environment, no lane forced either."""
    for var in ("FORCE_COLOR", "EIDOS_BACKEND"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def flow() -> ei.Flow:
    return (ei.from_pydict({"k": ["a", "b", "a", None, "b"], "v": [1, 2, 3, 4, 50]})
            .filter(ei.col("v") < 10)
            .group_by("k")
            .agg(total=ei.col("v").sum(), n=ei.count())
            .sort("k"))


@pytest.fixture
def plan(tmp_path, flow) -> str:
    path = tmp_path / "plan.json"
    path.write_text(flow.to_json())
    return str(path)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def shell(*argv: str, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "EIDOS_BACKEND")}
    return subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=300, **kw)


# ---------------------------------------------------------------- help


@pytest.mark.parametrize("argv", [[], ["devices"], ["backends"], ["explain"], ["run"], ["demo"]])
def test_help(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        main(argv + ["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: eidos")
    assert len(out.splitlines()) > 4


def test_top_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("devices", "backends", "explain", "run", "demo"):
        assert re.search(rf"^\s+{command}\s+\S", out, re.MULTILINE), command


def test_no_command_prints_usage_and_fails(capsys):
    rc, out, err = run_cli(capsys)
    assert rc == 2
    assert "usage: eidos" in err


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["frobnicate"])
    assert exit_.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"eidos {ei.__version__}"


# ---------------------------------------------------------------- devices, backends


def test_devices_table(capsys):
    rc, out, _ = run_cli(capsys, "devices")
    assert rc == 0
    d = ei.detect_devices()
    assert re.search(rf"^cpu cores\s+{d.cpu_cores}$", out, re.MULTILINE)
    assert re.search(rf"^gpus\s+{d.gpu_count}", out, re.MULTILINE)
    assert not ANSI.search(out)


def test_devices_json(capsys):
    rc, out, _ = run_cli(capsys, "devices", "--json")
    assert rc == 0
    d = json.loads(out)
    assert d == json.loads(json.dumps(asdict(ei.detect_devices())))


def test_backends_table(capsys):
    rc, out, _ = run_cli(capsys, "backends")
    assert rc == 0
    header, rule, *rows = out.splitlines()
    assert header.split() == ["lane", "kind", "available", "reason"]
    assert set(rule.replace(" ", "")) == {"-"}
    names = [row.split()[0] for row in rows]
    assert names == [lane.name for lane in ei.backends()]
    assert "reference" in names
    for row, lane in zip(rows, ei.backends()):
        assert row.split()[2] == ("yes" if lane.available else "no")


def test_backends_json(capsys):
    rc, out, _ = run_cli(capsys, "backends", "--json")
    assert rc == 0
    got = json.loads(out)
    assert [(x["lane"], x["kind"], x["available"]) for x in got] == \
        [(l.name, l.kind, l.available) for l in ei.backends()]


def test_terminal_output_is_rich(capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    rc, out, _ = run_cli(capsys, "backends")
    assert rc == 0
    assert "┃" in out or ANSI.search(out)


def test_terminal_prints_data_not_markup(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("FORCE_COLOR", "1")
    path = tmp_path / "markup.json"
    path.write_text(ei.from_pydict({"[bold]": ["[red]x[/red]", "[/]"]}).to_json())
    rc, out, err = run_cli(capsys, "run", str(path), "--engine", "reference")
    assert rc == 0, err
    assert "[red]x[/red]" in out and "[/]" in out and "[bold]" in out


def test_terminal_run_and_explain(capsys, monkeypatch, plan):
    monkeypatch.setenv("FORCE_COLOR", "1")
    rc, out, err = run_cli(capsys, "run", plan, "--engine", "reference")
    assert rc == 0, err
    assert "Int64" in out and "3 rows x 3 columns" in out  # eidos dtypes under the column names
    rc, out, err = run_cli(capsys, "explain", plan)
    assert rc == 0, err
    assert "lane:" in out


# ---------------------------------------------------------------- explain


def test_explain(capsys, plan, flow):
    rc, out, err = run_cli(capsys, "explain", plan)
    assert rc == 0, err
    # in-memory data read from a plan file gets labels of its own (the data is its identity)
    same = [re.sub(r"arrow-[0-9a-f]{12}", "arrow-…", text).strip() for text in (out, flow.explain())]
    assert same[0] == same[1]
    assert out.startswith("lane: ")
    assert "plan:" in out


def test_explain_engine(capsys, plan):
    rc, out, err = run_cli(capsys, "explain", plan, "--engine", "reference")
    assert rc == 0, err
    assert out.startswith("lane: reference")
    assert "rule 1" in out.splitlines()[0]


def test_explain_reads_stdin(capsys, monkeypatch, flow):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(flow.to_json()))
    rc, out, err = run_cli(capsys, "explain", "-")
    assert rc == 0, err
    assert out.startswith("lane: ")


def test_unknown_engine_is_an_error(capsys, plan):
    rc, out, err = run_cli(capsys, "explain", plan, "--engine", "refrence")
    assert rc == 1
    assert err.startswith("error: ")
    assert "refrence" in err and "reference" in err
    assert "Traceback" not in err


# ---------------------------------------------------------------- plan file errors


@pytest.mark.parametrize("content, words", [
    (None, "does not exist"),
    ("", "is empty"),
    ("{not json", "malformed"),
    ('{"hello": 1}', "not an eidos plan"),
    ('{"format": "eidos-plan", "version": 99, "plan": {}}', "version"),
    ('{"format": "eidos-plan", "version": 1, "plan": {"node": "Nope"}}', "Nope"),
    ('{"format": "eidos-plan", "version": 1, "plan": [1, 2]}', "plan"),
    (b"\xff\xfe\x00binary", "cannot read"),
])
@pytest.mark.parametrize("command", ["explain", "run"])
def test_bad_plan_file(capsys, tmp_path, command, content, words):
    path = tmp_path / "bad plan.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    rc, out, err = run_cli(capsys, command, str(path))
    assert rc == 1
    assert err.startswith("error: ") and err.count("\n") >= 1
    assert str(path) in err, err
    assert words in err
    assert "Traceback" not in err
    assert out == ""


def test_plan_file_is_a_folder(capsys, tmp_path):
    rc, _, err = run_cli(capsys, "run", str(tmp_path))
    assert rc == 1
    assert "is a folder" in err and str(tmp_path) in err


# ---------------------------------------------------------------- run


def test_run_prints_the_result(capsys, plan, flow):
    rc, out, err = run_cli(capsys, "run", plan)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["k", "total", "n"]
    expected = flow.run(engine="reference").to_pylist()
    body = [line.split() for line in lines[2:2 + len(expected)]]
    assert body == [[("null" if r["k"] is None else r["k"]), str(r["total"]), str(r["n"])] for r in expected]
    assert f"{len(expected)} rows x 3 columns" in out
    assert re.search(r"on lane \w+ in [0-9.]+ s", out)


def test_run_head_limits_rows(capsys, tmp_path):
    path = tmp_path / "big.json"
    path.write_text(ei.from_pydict({"i": list(range(100))}).to_json())
    rc, out, err = run_cli(capsys, "run", str(path), "--head", "5", "--engine", "reference")
    assert rc == 0, err
    assert "100 rows x 1 column (showing the first 5" in out
    assert [line.strip() for line in out.splitlines()[2:7]] == ["0", "1", "2", "3", "4"]
    rc, out, _ = run_cli(capsys, "run", str(path), "--head", "0", "--engine", "reference")
    assert rc == 0 and "showing" not in out and out.splitlines()[101].strip() == "99"


def test_run_engine(capsys, plan):
    rc, out, err = run_cli(capsys, "run", plan, "--engine", "reference")
    assert rc == 0, err
    assert "on lane reference" in out


def test_run_writes_parquet(capsys, tmp_path, plan, flow):
    target = tmp_path / "out.parquet"
    rc, out, err = run_cli(capsys, "run", plan, "-o", str(target))
    assert rc == 0, err
    assert f"wrote {target} (parquet, 3 rows)" in out
    assert pq.read_table(target).equals(flow.run(engine="reference"))
    assert sorted(os.listdir(tmp_path)) == ["out.parquet", "plan.json"]  # no temporary file left


def test_run_writes_csv(capsys, tmp_path, plan, flow):
    target = tmp_path / "out.csv"
    rc, out, err = run_cli(capsys, "run", plan, "--output", str(target), "--engine", "reference")
    assert rc == 0, err
    assert f"wrote {target} (csv)" in out
    got = pcsv.read_csv(target)
    assert got.column_names == ["k", "total", "n"]
    assert got.num_rows == 3


def test_run_unknown_extension(capsys, tmp_path, plan):
    target = tmp_path / "out.xlsx"
    rc, out, err = run_cli(capsys, "run", plan, "-o", str(target))
    assert rc == 1
    assert err.startswith("error: ") and "out.xlsx" in err and ".parquet or .csv" in err
    assert not target.exists()


def test_run_output_folder_missing(capsys, tmp_path, plan):
    rc, _, err = run_cli(capsys, "run", plan, "-o", str(tmp_path / "nowhere" / "out.parquet"))
    assert rc == 1
    assert err.startswith("error: ") and "does not exist" in err


def test_run_failing_source_is_an_error(capsys, tmp_path):
    data = tmp_path / "gone.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), data)
    path = tmp_path / "plan.json"
    path.write_text(ei.read_parquet(data).to_json())
    data.unlink()
    rc, _, err = run_cli(capsys, "run", str(path), "--engine", "reference")
    assert rc == 1
    assert err.startswith("error: ")
    assert "Traceback" not in err


# ---------------------------------------------------------------- demo


def test_demo(capsys, tmp_path):
    rc, out, err = run_cli(capsys, "demo", "--rows", "400", "--dir", str(tmp_path))
    assert rc == 0, out + err
    assert "left to itself, eidos chooses" in out
    assert re.search(r"^reference\s+reference\s+.*is the reference", out, re.MULTILINE)
    for lane in ei.backends():
        assert re.search(rf"^{re.escape(lane.name)}\s", out, re.MULTILINE), lane.name
    assert "NO (see below)" not in out and "failed:" not in out
    assert "result (lane " in out
    assert {"orders.parquet", "customers.parquet", "plan.json"} <= set(os.listdir(tmp_path))
    # the demo's plan runs again through the command
    rc, out, err = run_cli(capsys, "run", str(tmp_path / "plan.json"), "--engine", "reference")
    assert rc == 0, err
    assert out.splitlines()[0].split() == ["region", "orders", "customers", "revenue", "largest", "first_order"]


class Liar(Backend):
    """Answers like the reference, with one value off."""

    kind = "free"

    def execute(self, plan):
        table = ei.Flow(plan).run(engine="reference")
        return table.set_column(1, table.field(1), pa.array([0] * table.num_rows, table.field(1).type))


class Broken(Backend):
    kind = "free"

    def execute(self, plan):
        raise ExecutionError("the engine fell over")


@pytest.fixture
def bad_lanes():
    ei.register_backend("liar", Liar)
    ei.register_backend("broken", Broken)
    yield
    registry.unregister_backend("liar")
    registry.unregister_backend("broken")


def test_demo_reports_disagreement_and_failure(capsys, bad_lanes):
    rc, out, err = run_cli(capsys, "demo", "--rows", "300")
    assert rc == 1
    assert re.search(r"^liar\s+free\s.*NO \(see below\)", out, re.MULTILINE)
    assert "liar vs reference: tables differ" in out
    assert re.search(r"^broken\s+free\s.*failed: .*the engine fell over", out, re.MULTILINE)
    assert "2 lanes failed or disagreed with the reference" in out


def test_demo_rejects_no_rows(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--rows", "0"])
    assert exit_.value.code == 2


def test_demo_writes_into_a_folder_with_other_files(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    rc, out, err = run_cli(capsys, "demo", "--rows", "100", "--dir", str(tmp_path / "new" / "deeper"))
    assert rc == 0, err
    rc, out, err = run_cli(capsys, "demo", "--rows", "100", "--dir", str(tmp_path))
    assert rc == 0, err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_demo_force_needs_dir(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--force"])
    assert exit_.value.code == 2
    assert "--force goes with --dir" in capsys.readouterr().err


@pytest.mark.parametrize("make, words", [
    (lambda p: p.write_text("x"), "is a file, not a folder"),
    (lambda p: None, "cannot make the folder"),
])
def test_demo_dir_that_cannot_be_a_folder(capsys, tmp_path, make, words):
    target = tmp_path / "d"
    make(target)
    where = target if words != "cannot make the folder" else Path("/proc/eidos-demo")
    rc, out, err = run_cli(capsys, "demo", "--rows", "100", "--dir", str(where))
    assert rc == 1
    assert err.startswith("error: ") and words in err and "Traceback" not in err


def test_run_output_that_cannot_be_written(capsys, tmp_path, plan):
    rc, out, err = run_cli(capsys, "run", plan, "-o", "/proc/out.csv")
    assert (rc, out) == (1, "")
    assert err.startswith("error: cannot write '/proc/out.csv': cannot create a file in '/proc': ")
    (tmp_path / "out.parquet").mkdir()
    rc, out, err = run_cli(capsys, "run", plan, "-o", str(tmp_path / "out.parquet"))
    assert rc == 1 and "it is a folder" in err


def test_an_os_error_is_an_error_line(capsys, monkeypatch, plan):
    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device", "/data/out.parquet")

    monkeypatch.setattr(ei.Flow, "run", refuse)
    rc, out, err = run_cli(capsys, "run", plan)
    assert (rc, err) == (1, "error: No space left on device: '/data/out.parquet'\n")
    monkeypatch.setenv("EIDOS_DEBUG", "1")
    rc, out, err = run_cli(capsys, "run", plan)
    assert rc == 1 and "Traceback" in err and err.endswith("error: No space left on device: '/data/out.parquet'\n")


def test_a_bug_keeps_its_traceback(capsys, monkeypatch, plan):
    def bug(*args, **kwargs):
        raise ZeroDivisionError("a bug in eidos")

    monkeypatch.setattr(ei.Flow, "run", bug)
    with pytest.raises(ZeroDivisionError):
        main(["run", plan])


def test_entry_point_bad_input_never_prints_a_traceback(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "bad.json").write_text("{not json")
    plan = tmp_path / "plan.json"
    plan.write_text(ei.from_pydict({"a": [1]}).to_json())
    cases = [
        ["demo", "--rows", "50", "--dir", str(tmp_path / "file")],
        ["demo", "--rows", "50", "--dir", "/proc/eidos-demo"],
        ["run", str(plan), "-o", "/proc/out.csv"],
        ["run", str(plan), "-o", str(tmp_path)],
        ["run", str(plan), "-o", str(tmp_path / "no" / "out.csv")],
        ["run", str(tmp_path / "bad.json")],
        ["run", str(tmp_path)],
        ["explain", str(tmp_path / "missing.json")],
    ]
    for argv in cases:
        result = shell(str(EIDOS), *argv)
        assert result.returncode == 1, (argv, result.stderr)
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr, (argv, result.stderr)


# ---------------------------------------------------------------- entry points


def test_entry_point_script():
    assert EIDOS.exists(), f"the eidos script is not installed beside {sys.executable}"
    result = shell(str(EIDOS), "backends")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].split() == ["lane", "kind", "available", "reason"]
    assert not ANSI.search(result.stdout) and "┃" not in result.stdout  # plain in a pipe


def test_python_dash_m():
    result = shell(sys.executable, "-m", "eidos", "devices", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["cpu_cores"] >= 1


def test_entry_point_error_exit(tmp_path):
    result = shell(str(EIDOS), "run", str(tmp_path / "missing.json"))
    assert result.returncode == 1
    assert result.stderr == f"error: plan file {str(tmp_path / 'missing.json')!r} does not exist\n"
    assert result.stdout == ""


def test_entry_point_run(plan, flow):
    result = shell(str(EIDOS), "run", plan, "--engine", "reference")
    assert result.returncode == 0, result.stderr
    assert "3 rows x 3 columns" in result.stdout
    assert not ANSI.search(result.stdout)


def test_run_into_closed_pipe(tmp_path):
    # `eidos run plan.json | head -1` must not end in a traceback
    plan = tmp_path / "long.json"
    plan.write_text(ei.from_pydict({"i": list(range(20_000))}).to_json())
    result = shell("bash", "-c", f"'{EIDOS}' run '{plan}' --head 0 --engine reference | head -1")
    assert result.returncode == 0
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------- the README's Quickstart and CI agree


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quickstart.*?```(?:sh|bash|console)?\n(.*?)```", readme, re.DOTALL)
    assert block, "README.md has no Quickstart code block"
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text()
    assert f'TEST_COMMAND="{commands[1]}"' in ci


def test_readme_python_examples_run(tmp_path, monkeypatch, capsys):
    """Every ```python block of the README runs as written, beside the demo's data."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--rows", "300", "--dir", "demo"]) in (0, 1)  # the data; agreement is test_demo's
    for i, code in enumerate(blocks):
        exec(compile(code, f"README.md python block {i + 1}", "exec"), {"__name__": f"readme_{i}"})


def test_backends_targets(capsys):
    from eidos.isa import registry

    rc, out, _ = run_cli(capsys, "backends", "--targets")
    assert rc == 0
    header, _, *rows = out.splitlines()
    assert header.split() == ["target", "source", "available", "reason"]
    targets = registry.targets()
    assert [r.split()[0] for r in rows] == [t.name for t in targets]
    assert [r.split()[2] for r in rows] == ["yes" if t.available else "no" for t in targets]
    rc, out, _ = run_cli(capsys, "backends", "--targets", "--json")
    assert [(x["name"], x["available"]) for x in json.loads(out)] == [(t.name, t.available) for t in targets]


def test_backends_matrix_prints_what_was_measured_and_where(capsys, monkeypatch, tmp_path):
    from eidos.isa import matrix

    monkeypatch.setenv("EIDOS_CACHE_DIR", str(tmp_path))
    rc, _, err = run_cli(capsys, "backends", "--matrix")
    assert rc == 1 and "no speed matrix has been measured on this machine" in err and "--measure" in err
    result = matrix.measure((16,), 1, kinds=["map"], targets=["reference"], command="python bench/matrix.py")
    matrix.save(result)
    rc, out, _ = run_cli(capsys, "backends", "--matrix")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split() == ["operation", "elements", "reference"]
    assert lines[2].split()[:2] == ["map", "16"] and lines[2].endswith("GB/s)")
    assert f"measured {result['date']} on " in out and "command: python bench/matrix.py" in out
    assert f"from {tmp_path / 'matrix.json'}" in out
    rc, out, _ = run_cli(capsys, "backends", "--matrix", "--json")
    assert json.loads(out) == result


def test_backends_matrix_file_that_is_not_json(capsys, monkeypatch, tmp_path):
    from eidos.isa import matrix

    monkeypatch.setenv("EIDOS_CACHE_DIR", str(tmp_path))
    path = matrix.default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{half a file")
    rc, _, err = run_cli(capsys, "backends", "--matrix")
    assert rc == 1 and err.startswith(f"error: the speed matrix {str(path)!r} is not valid JSON")


def test_backends_matrix_measure_times_every_available_target(capsys, monkeypatch, tmp_path):
    from eidos.isa import matrix, registry

    monkeypatch.setenv("EIDOS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(matrix, "QUICK_SIZES", (16,))
    monkeypatch.setattr(matrix, "KINDS", {"binary map": matrix.KINDS["binary map"]})  # one compile per target
    rc, out, _ = run_cli(capsys, "backends", "--matrix", "--measure")
    assert rc == 0 and "command: eidos backends --matrix --measure" in out
    saved = matrix.load()
    timed = {c["target"] for c in saved["cells"] if "min_s" in c}
    assert timed == {t.name for t in registry.targets() if t.available and t.name not in registry.ELSEWHERE}
