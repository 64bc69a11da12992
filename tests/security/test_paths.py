"""Files and folders: what a path can make eidos read, and what eidos writes.

Folders are walked without following links out of them, loops end, and a file is read once however many
links reach it; hive-style key=value folders are partition columns on every lane; files eidos writes get
the mode any tool's would; the demo never replaces a user's files.
"""

from __future__ import annotations

import os
import stat

import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

import eidos as ei
from eidos.cli import main


@pytest.fixture
def flow():
    return ei.from_pydict({"a": [1, 2]})


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
