"""Sources read regular files only: a FIFO, a device, a socket or a file of /proc is a PlanError naming it.

Reading one may block forever (a FIFO with no writer, /dev/stdin), never end (/dev/zero) or show the
process's secrets (/proc/self/environ). The check runs when the Flow is built and, for a plan that was
built elsewhere or whose files were swapped since, before each run, before anything opens the file:
every test here runs in a thread with a time limit, so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import os
import socket
import stat
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import eidos as ei
from eidos.errors import PlanError
from tests.lanes.helpers import lane_or_skip
from tests.security.test_paths import READERS, within

LIMIT = 20   # seconds; each case takes milliseconds when it does not hang


def refused(fn, *words: str) -> str:
    """fn() raises a PlanError holding each of `words`, within LIMIT seconds; its message."""
    def attempt():
        with pytest.raises(PlanError) as info:
            fn()
        return str(info.value)

    message = within(LIMIT, attempt)
    for w in words:
        assert w in message, message
    return message


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "data.parquet"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("read", [ei.read_parquet, ei.read_csv], ids=["parquet", "csv"])
def test_a_fifo_is_refused_at_build(fifo, read):
    refused(lambda: read(fifo), repr(str(fifo)), "FIFO", "regular file")


def test_a_fifo_in_a_folder_or_a_glob_is_refused(tmp_path):
    pq.write_table(pa.table({"x": [1]}), tmp_path / "a.parquet")
    os.mkfifo(tmp_path / "b.parquet")
    refused(lambda: ei.read_parquet(tmp_path), repr(str(tmp_path / "b.parquet")), "FIFO")
    refused(lambda: ei.read_parquet(tmp_path / "*.parquet"), "FIFO")


def test_a_link_to_a_fifo_is_refused(tmp_path):
    os.mkdir(tmp_path / "d")
    pq.write_table(pa.table({"x": [1]}), tmp_path / "d" / "a.parquet")
    os.mkfifo(tmp_path / "d" / "pipe")
    os.symlink("pipe", tmp_path / "d" / "b.parquet")
    refused(lambda: ei.read_parquet(tmp_path / "d"), "b.parquet", "FIFO")
    refused(lambda: ei.read_parquet(tmp_path / "d" / "b.parquet"), "FIFO")
    refused(lambda: ei.read_csv(tmp_path / "d" / "b.parquet"), "FIFO")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/random", "/dev/urandom", "/dev/stdin"])
@pytest.mark.parametrize("read", [ei.read_parquet, ei.read_csv], ids=["parquet", "csv"])
def test_devices_are_refused(device, read):
    try:
        mode = os.stat(device).st_mode
    except OSError as e:
        pytest.skip(f"{device}: {e.strerror}")
    if stat.S_ISREG(mode):
        pytest.skip(f"{device} is a regular file here (stdin redirected from a file)")
    refused(lambda: read(device), repr(device), "not a regular file")


@pytest.mark.parametrize("path", ["/proc/self/status", "/proc/self/environ", "/proc/self/cmdline",
                                  "/sys/kernel/mm/transparent_hugepage/enabled"])
@pytest.mark.parametrize("read", [ei.read_parquet, ei.read_csv], ids=["parquet", "csv"])
def test_kernel_pseudo_files_are_refused(path, read):
    if not os.path.exists(path):
        pytest.skip(f"no {path} here")
    refused(lambda: read(path), repr(path), "pseudo-filesystem")


def test_a_socket_is_refused():
    with tempfile.TemporaryDirectory(prefix="eidos-") as folder:   # short: a socket path has at most 107 bytes
        path = os.path.join(folder, "s.csv")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            server.bind(path)
            server.listen(1)
            refused(lambda: ei.read_csv(path), "socket")
            refused(lambda: ei.read_parquet(path), "socket")
        finally:
            server.close()


# ---------------------------------------------------------------- before each run

@pytest.mark.parametrize("lane", READERS)
def test_a_file_swapped_for_a_fifo_stops_the_run(tmp_path, lane):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), path)
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("x\n1\n2\n")
    flows = [ei.read_parquet(path), ei.read_csv(csv_path), ei.read_csv(csv_path, has_header=False)]
    os.unlink(path)
    os.mkfifo(path)
    os.unlink(csv_path)
    os.mkfifo(csv_path)
    for flow in flows:
        if lane_or_skip(lane).supports(flow.plan):
            continue   # the lane lacks a type of the file (triton: strings): nothing to run
        refused(lambda flow=flow: flow.run(engine=lane), "FIFO")
        refused(lambda flow=flow: list(flow.stream(engine=lane)), "FIFO")


@pytest.mark.parametrize("target", ["fifo", "/dev/zero", "/dev/stdin", "/proc/self/environ"])
@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_a_plan_naming_a_special_file_does_not_run(tmp_path, target, kind):
    """A plan from JSON names its files as it likes; the run stops before opening any of them."""
    path = str(tmp_path / f"t.{kind}")
    if kind == "parquet":
        pq.write_table(pa.table({"x": [1, 2]}), path)
        flow = ei.read_parquet(path)
    else:
        with open(path, "w") as f:
            f.write("x\n1\n2\n")
        flow = ei.read_csv(path)
    if target == "fifo":
        target = str(tmp_path / "pipe")
        os.mkfifo(target)
    elif not os.path.exists(target):
        pytest.skip(f"no {target} here")
    elif stat.S_ISREG(os.stat(target).st_mode) and not target.startswith("/proc"):
        pytest.skip(f"{target} is a regular file here")
    loaded = ei.Flow.from_json(flow.to_json().replace(path, target))
    assert target in loaded.to_json()
    refused(lambda: loaded.run(), repr(target))
    refused(lambda: loaded.write_parquet(tmp_path / "out.parquet"), repr(target))
    assert not os.path.exists(tmp_path / "out.parquet")


@pytest.mark.parametrize("scheme", ["sqlite", "duckdb"])
def test_a_database_file_that_is_no_regular_file_is_refused(tmp_path, scheme):
    pytest.importorskip("adbc_driver_sqlite" if scheme == "sqlite" else "duckdb")
    path = str(tmp_path / f"db.{scheme}")
    if scheme == "sqlite":
        import sqlite3

        with sqlite3.connect(path) as con:
            con.execute("create table t (x integer)")
        con.close()
    else:
        import duckdb

        with duckdb.connect(path) as con:
            con.execute("create table t (x integer)")
    flow = ei.read_sql(f"{scheme}:///{path}", table="t")
    os.unlink(path)
    os.mkfifo(path)
    refused(lambda: flow.run(engine=scheme), "FIFO")          # the run opens it again: refused first
    refused(lambda: ei.read_sql(f"{scheme}:///{path}", table="t"), repr(path), "FIFO")
    refused(lambda: ei.read_sql(f"{scheme}:////dev/zero", table="t"), "character device")
