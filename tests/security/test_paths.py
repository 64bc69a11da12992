"""Files and folders: what a path can make eidos read, and what eidos writes.

Folders are walked without following links out of them, loops end, and a file is read once however many
links reach it; hive-style key=value folders are partition columns on every lane; files eidos writes get
the mode any tool's would; the demo never replaces a user's files.
"""

from __future__ import annotations

import datetime as _dt
import os
import stat
import threading

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

import eidos as ei
from eidos import col
from eidos.cli import main
from eidos.errors import PlanError
from eidos.testing.compare import assert_tables_equal
from tests.lanes.conftest import LANES
from tests.lanes.helpers import run_or_skip

READERS = [name for name in LANES if name not in ("sqlite", "postgresql")]


@pytest.fixture
def flow():
    return ei.from_pydict({"a": [1, 2]})


def part(path, **columns) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table(columns or {"x": [1, 2]}), path)


def total(path) -> int:
    return ei.read_parquet(path).agg(n=ei.count()).run(engine="reference").column("n")[0].as_py()


def within(seconds: float, fn):
    """fn() run in a thread; a test failure (not a hung suite) when it has not returned in `seconds`."""
    out: list = []
    worker = threading.Thread(target=lambda: out.append(_catch(fn)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"did not return within {seconds} s"
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def _catch(fn):
    try:
        return fn()
    except BaseException as e:  # noqa: BLE001 - handed back to the test's thread
        return e


# ---------------------------------------------------------------- links in folders

def test_a_link_to_a_sibling_folder_adds_nothing(tmp_path):
    part(tmp_path / "d" / "a" / "0.parquet")
    os.symlink(tmp_path / "d" / "a", tmp_path / "d" / "b")
    os.symlink("a", tmp_path / "d" / "0-first")   # sorted before the folder it names
    flow = ei.read_parquet(tmp_path / "d")
    assert flow.plan.source.files == (str(tmp_path / "d" / "a" / "0.parquet"),)
    assert total(tmp_path / "d") == 2


def test_a_link_to_a_file_inside_is_read_once(tmp_path):
    part(tmp_path / "d" / "0.parquet")
    os.symlink(tmp_path / "d" / "0.parquet", tmp_path / "d" / "copy.parquet")
    assert total(tmp_path / "d") == 2


def test_a_file_reached_only_through_a_link_is_read(tmp_path):
    part(tmp_path / "d" / ".store" / "0.parquet")       # hidden: not walked itself
    os.symlink(tmp_path / "d" / ".store", tmp_path / "d" / "data")
    assert ei.read_parquet(tmp_path / "d").plan.source.files == (str(tmp_path / "d" / "data" / "0.parquet"),)


@pytest.mark.parametrize("glob", [False, True])
def test_a_link_loop_ends(tmp_path, glob):
    part(tmp_path / "d" / "sub" / "0.parquet")
    os.symlink(tmp_path / "d", tmp_path / "d" / "sub" / "loop")
    os.symlink("..", tmp_path / "d" / "sub" / "up")
    os.symlink(tmp_path / "d" / "sub", tmp_path / "d" / "sub" / "self")
    path = tmp_path / "d" / "**" / "*.parquet" if glob else tmp_path / "d"
    assert within(30, lambda: total(path)) == 2


@pytest.mark.parametrize("link_to", ["folder", "file"])
def test_a_link_out_of_the_folder_is_refused(tmp_path, link_to):
    part(tmp_path / "d" / "0.parquet")
    part(tmp_path / "elsewhere" / "1.parquet")
    target = tmp_path / "elsewhere" if link_to == "folder" else tmp_path / "elsewhere" / "1.parquet"
    link = tmp_path / "d" / ("more" if link_to == "folder" else "more.parquet")
    os.symlink(target, link)
    with pytest.raises(PlanError) as error:
        ei.read_parquet(tmp_path / "d")
    assert str(error.value) == (f"{str(link)!r} is a link to {str(target)!r}, outside the folder "
                                f"{str(tmp_path / 'd')!r}; eidos follows no link out of the folder it reads: "
                                f"read {str(target)!r} on its own, or copy it into the folder")


def test_a_link_to_the_parent_is_out_of_the_folder(tmp_path):
    part(tmp_path / "d" / "0.parquet")
    os.symlink("..", tmp_path / "d" / "up")
    with pytest.raises(PlanError, match="outside the folder"):
        within(30, lambda: ei.read_parquet(tmp_path / "d"))


def test_a_dangling_link_is_named(tmp_path):
    part(tmp_path / "d" / "0.parquet")
    os.symlink(tmp_path / "gone.parquet", tmp_path / "d" / "1.parquet")
    with pytest.raises(PlanError, match=r"1\.parquet' is a link to '.*gone\.parquet', which does not exist"):
        ei.read_parquet(tmp_path / "d")


def test_the_folder_named_may_itself_be_a_link(tmp_path):
    part(tmp_path / "real" / "0.parquet")
    os.symlink(tmp_path / "real", tmp_path / "named")
    assert total(tmp_path / "named") == 2


def test_hidden_names_are_skipped_and_an_empty_folder_is_named(tmp_path):
    part(tmp_path / "d" / ".0.parquet.tmp.parquet")
    part(tmp_path / "d" / ".hidden" / "1.parquet")
    with pytest.raises(PlanError, match="no .parquet files in folder .*names starting with '.' are skipped"):
        ei.read_parquet(tmp_path / "d")


def test_globs(tmp_path, monkeypatch):
    for name in ("a/1.parquet", "a/2.parquet", "b/1.parquet", "b/deep/1.parquet", "c.parquet"):
        part(tmp_path / name)
    monkeypatch.chdir(tmp_path)
    assert ei.read_parquet("*/1.parquet").plan.source.files == ("a/1.parquet", "b/1.parquet")
    assert ei.read_parquet("**/1.parquet").plan.source.files == ("a/1.parquet", "b/1.parquet", "b/deep/1.parquet")
    assert ei.read_parquet("*.parquet").plan.source.files == ("c.parquet",)
    assert ei.read_parquet(str(tmp_path / "a" / "?.parquet")).plan.source.files == tuple(
        str(tmp_path / "a" / n) for n in ("1.parquet", "2.parquet"))
    with pytest.raises(PlanError, match="the glob matched nothing"):
        ei.read_parquet("*/9.parquet")


def test_a_file_name_with_wildcard_characters_is_read_as_named(tmp_path):
    part(tmp_path / "data[1].parquet")
    assert ei.read_parquet(tmp_path / "data[1].parquet").plan.source.files == (str(tmp_path / "data[1].parquet"),)


# ---------------------------------------------------------------- hive partitions

def hive_folder(root) -> None:
    """year (int), city (string, URL-encoded, null), day (date) folders; a file at each leaf."""
    leaves = [("2023", "z%C3%BCrich", "2023-01-05"), ("2024", "bern", "2024-02-29"),
              ("2024", "__HIVE_DEFAULT_PARTITION__", "2024-03-01"), ("2024", "a%2Fb", "2024-03-01")]
    for i, (year, city, day) in enumerate(leaves):
        part(root / f"year={year}" / f"city={city}" / f"day={day}" / "0.parquet",
             v=pa.array([i, 10 * i]), s=pa.array(["p", None]))


def test_hive_columns_and_types(tmp_path):
    hive_folder(tmp_path)
    flow = ei.read_parquet(tmp_path)
    assert str(flow.schema) == "Schema(v: Int64, s: String, year: Int64, city: String, day: Date)"
    got = flow.filter(col("s").is_not_null()).sort("v").run(engine="reference").to_pydict()
    assert got["city"] == ["zürich", "bern", None, "a/b"]
    assert got["year"] == [2023, 2024, 2024, 2024]
    assert got["day"] == [_dt.date(2023, 1, 5), _dt.date(2024, 2, 29), _dt.date(2024, 3, 1), _dt.date(2024, 3, 1)]


@pytest.mark.parametrize("values, dtype", [
    (["1", "-2", "003"], "Int64"), (["1", "2.5", "1e3"], "Float64"), (["2024-01-02", "1999-12-31"], "Date"),
    (["1", "x"], "String"), (["2024-02-30"], "String"), (["9223372036854775808"], "Float64"),
    (["", "__HIVE_DEFAULT_PARTITION__"], "String"), (["7", "__HIVE_DEFAULT_PARTITION__"], "Int64"),
])
def test_hive_types(tmp_path, values, dtype):
    for i, v in enumerate(values):
        part(tmp_path / f"k={v}" / f"{i}.parquet")
    assert ei.read_parquet(tmp_path).schema["k"].name == dtype


QUERIES = {
    "all": lambda f: f,
    "year": lambda f: f.filter(col("year") == 2024),
    "null city": lambda f: f.filter(col("city").is_null()),
    "day range": lambda f: f.filter((col("day") >= _dt.date(2024, 3, 1)) & (col("v") > 0)),
    "by city": lambda f: f.group_by("city", "year").agg(n=ei.count(), v=col("v").sum()),
    "only partitions": lambda f: f.select("year", "day"),
    "in": lambda f: f.filter(col("city").is_in(["bern", "a/b"]) | (col("year") < 2024)),
}


@pytest.mark.parametrize("query", sorted(QUERIES))
@pytest.mark.parametrize("lane_name", READERS)
def test_hive_partitions_on_every_lane(tmp_path, lane_name, query):
    hive_folder(tmp_path)
    flow = QUERIES[query](ei.read_parquet(tmp_path))
    expected = flow.run(engine="reference")
    assert_tables_equal(run_or_skip(flow, lane_name), expected, ordered=False)
    again = ei.Flow.from_json(flow.to_json())
    assert_tables_equal(run_or_skip(again, lane_name), expected, ordered=False)


@pytest.mark.parametrize("lane_name", READERS)
def test_numeric_partitions_on_every_lane(tmp_path, lane_name):
    for year in (2022, 2023, 2024):
        for rate in ("0.5", "1.25", "__HIVE_DEFAULT_PARTITION__"):
            part(tmp_path / f"year={year}" / f"rate={rate}" / "0.parquet", v=pa.array([1.5, year - 2000.0]))
    flow = ei.read_parquet(tmp_path)
    for query in (flow.filter(col("year") >= 2023).agg(v=col("v").sum(), y=col("year").sum(), n=ei.count()),
                  flow.filter(col("rate").is_not_null()).agg(r=(col("rate") * col("v")).sum())):
        assert_tables_equal(run_or_skip(query, lane_name), query.run(engine="reference"), ordered=True, float_rel=1e-12)


def test_a_filter_on_partitions_reads_only_the_files_it_keeps(tmp_path):
    hive_folder(tmp_path)
    flow = ei.read_parquet(tmp_path)
    assert "(2 files, partitioned by year, city, day)" in flow.filter(col("day") >= _dt.date(2024, 3, 1)).explain()
    assert "(1 file, partitioned by" in flow.filter((col("year") == 2023) & (col("v") > 0)).explain()
    assert "(4 files, partitioned by" in flow.filter((col("year") == 2023) | (col("v") > 0)).explain()
    none = flow.filter(col("year") == 1999)
    assert "(1 file, partitioned by" in none.explain() and none.run().num_rows == 0
    # a file the filter drops is not even opened
    later = flow.filter(col("year") == 2024).agg(n=ei.count())
    for leaf in tmp_path.glob("year=2023/**/0.parquet"):
        leaf.write_bytes(b"not parquet any more")
    for lane_name in READERS:
        if lane_name in {b.name for b in ei.backends() if b.available}:
            assert run_or_skip(later, lane_name).to_pydict() == {"n": [6]}


def test_hive_keys_must_agree(tmp_path):
    part(tmp_path / "year=2024" / "0.parquet")
    part(tmp_path / "1.parquet")
    with pytest.raises(PlanError, match="partitioned differently: no key=value folders in .*1.parquet', "
                                        "key=value folders year=... in .*0.parquet'; every file must sit below"):
        ei.read_parquet(tmp_path)


def test_a_partition_named_as_a_column_is_refused(tmp_path):
    part(tmp_path / "x=1" / "0.parquet")
    with pytest.raises(PlanError, match=r"column 'x' is both in the files and in the folder names \(x=...\)"):
        ei.read_parquet(tmp_path)


def test_a_single_file_has_no_partitions(tmp_path):
    part(tmp_path / "year=2024" / "0.parquet")
    assert ei.read_parquet(tmp_path / "year=2024" / "0.parquet").schema.names == ("x",)
    assert ei.read_parquet(tmp_path / "year=2024").schema.names == ("x",)


def test_a_glob_reads_partitions_below_its_fixed_folder(tmp_path):
    hive_folder(tmp_path)
    flow = ei.read_parquet(str(tmp_path / "year=2024" / "*" / "*" / "*.parquet"))
    assert flow.schema.names == ("v", "s", "city", "day")


# ---------------------------------------------------------------- what eidos writes


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_file_mode_follows_the_umask(flow, tmp_path, umask):
    old = os.umask(umask)
    try:
        flow.write_parquet(tmp_path / "out.parquet", engine="reference")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "out.parquet").st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600])
def test_written_over_file_keeps_its_mode(flow, tmp_path, mode):
    target = tmp_path / "out.csv"
    target.write_text("old")
    os.chmod(target, mode)
    old = os.umask(0o077)
    try:
        flow.write_csv(target, engine="reference")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(target).st_mode) == mode
    assert pcsv.read_csv(target).column("a").to_pylist() == [1, 2]


def test_a_link_is_written_through(flow, tmp_path):
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "out.parquet"
    real.write_bytes(b"old")
    os.chmod(real, 0o640)
    os.symlink(real, tmp_path / "link.parquet")
    flow.write_parquet(tmp_path / "link.parquet", engine="reference")
    assert os.path.islink(tmp_path / "link.parquet")
    assert pq.read_table(real).column("a").to_pylist() == [1, 2]
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path / "real")) == ["out.parquet"]


def test_demo_does_not_replace_the_users_files(capsys, tmp_path):
    (tmp_path / "orders.parquet").write_bytes(b"mine")
    (tmp_path / "plan.json").write_text("mine too")
    assert main(["demo", "--rows", "100", "--dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"error: {str(tmp_path)!r} already holds orders.parquet, plan.json, which the demo would "
                   "replace; name another folder, or pass --force to replace them\n")
    assert (tmp_path / "orders.parquet").read_bytes() == b"mine"
    assert sorted(os.listdir(tmp_path)) == ["orders.parquet", "plan.json"]
    assert main(["demo", "--rows", "100", "--dir", str(tmp_path), "--force"]) == 0
    assert pq.read_table(tmp_path / "orders.parquet").num_rows == 100


def test_demo_files_follow_the_umask(capsys, tmp_path):
    old = os.umask(0o027)
    try:
        assert main(["demo", "--rows", "100", "--dir", str(tmp_path / "demo")]) == 0
    finally:
        os.umask(old)
    for name in ("orders.parquet", "customers.parquet", "plan.json"):
        assert stat.S_IMODE(os.stat(tmp_path / "demo" / name).st_mode) == 0o640


def test_demo_files_are_written_atomically(capsys, tmp_path, monkeypatch):
    """A demo that fails while writing its data leaves the files that were there as they were, and no other."""
    for name in ("orders.parquet", "customers.parquet", "plan.json"):
        (tmp_path / name).write_bytes(b"mine")

    def half_written(table, where, **kwargs):
        with open(where, "wb") as f:
            f.write(b"PAR1 half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", half_written)
    assert main(["demo", "--rows", "100", "--dir", str(tmp_path), "--force"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: writing parquet to {str(tmp_path / 'orders.parquet')!r} failed: OSError: ")
    assert sorted(os.listdir(tmp_path)) == ["customers.parquet", "orders.parquet", "plan.json"]
    assert all((tmp_path / name).read_bytes() == b"mine" for name in os.listdir(tmp_path))
