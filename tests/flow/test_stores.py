"""Object stores: s3:// against a local S3-compatible server (moto's, one per test session), http(s):// against
a local http.server, gs:// for its error path only (no local GCS server here). Every lane that reads files
reads the same values from the store as the reference lane; credentials never show; plans read from JSON
reach only what the trust rules allow (docs/security.md)."""

from __future__ import annotations

import functools
import http.server
import json
import socket
import threading

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import eidos as ei
from eidos import col
from eidos.errors import EidosError, ExecutionError, PlanError
from eidos.hal import registry
from eidos.testing.compare import assert_tables_equal
from tests.lanes.helpers import run_or_skip
from tests.lanes.test_files import READERS

SECRET = "sEcReT-do-not-show-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3():
    """A moto S3 server on 127.0.0.1 and the storage_options that reach it, with a bucket 'bkt'."""
    server_mod = pytest.importorskip("moto.server", reason="moto[server] (the test extra) runs the local S3")
    port = _free_port()
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = {"aws_access_key_id": "eidos-test", "aws_secret_access_key": SECRET, "aws_region": "us-east-1",
               "aws_endpoint_url": f"http://127.0.0.1:{port}"}
    fs = pafs.S3FileSystem(access_key="eidos-test", secret_key=SECRET, region="us-east-1",
                           endpoint_override=f"127.0.0.1:{port}", scheme="http", allow_bucket_creation=True)
    fs.create_dir("bkt")
    yield options, fs
    server.stop()


TABLE = pa.table({"k": ["a", "b", None, "a"], "n": pa.array([1, 2, 3, None], pa.int64()), "x": [0.5, -1.0, None, 2.0]})


@pytest.fixture(scope="session")
def objects(s3):
    """The same table as parquet (a hive folder of two files), CSV, NDJSON and IPC objects in the bucket."""
    options, fs = s3
    pq.write_table(TABLE.slice(0, 2), "bkt/data/part=1/a.parquet", filesystem=fs)
    pq.write_table(TABLE.slice(2), "bkt/data/part=2/b.parquet", filesystem=fs)
    with fs.open_output_stream("bkt/t.ndjson") as f:
        f.write("".join(json.dumps(r) + "\n" for r in TABLE.to_pylist()).encode())
    with fs.open_output_stream("bkt/t.arrow") as f:
        feather.write_feather(TABLE, f)
    with fs.open_output_stream("bkt/t.csv") as f:
        f.write(b"k,n,x\na,1,0.5\nb,2,-1.0\n,3,\na,,2.0\n")
    return options


@pytest.mark.parametrize("lane_name", READERS)
def test_every_reader_reads_s3_alike(objects, lane_name):
    flows = [ei.read_parquet("s3://bkt/data", storage_options=objects).select("k", "n", "x"),
             ei.read_parquet("s3://bkt/data/*/*.parquet", storage_options=objects).filter(col("part") == 2),
             ei.read_csv("s3://bkt/t.csv", storage_options=objects),
             ei.read_ndjson("s3://bkt/t.ndjson", storage_options=objects),
             ei.read_ipc("s3://bkt/t.arrow", storage_options=objects)]
    for flow in flows:
        expected = flow.run(engine="reference")
        assert_tables_equal(run_or_skip(flow, lane_name), expected, ordered=True)
    assert_tables_equal(flows[0].run(engine="reference"), TABLE, ordered=True)
    assert flows[1].run(engine="reference").column("n").to_pylist() == [3, None]


def test_writers_to_s3_round_trip_and_stay_atomic(s3, objects):
    options, fs = s3
    flow = ei.from_arrow(TABLE)
    flow.write_parquet("s3://bkt/out/t.parquet", storage_options=options, compression="gzip")
    flow.write_csv("s3://bkt/out/t.csv", storage_options=options, separator=";")
    assert ei.read_parquet("s3://bkt/out/t.parquet", storage_options=options).run().to_pydict() == TABLE.to_pydict()
    back = ei.read_csv("s3://bkt/out/t.csv", storage_options=options, separator=";")
    assert back.run().to_pydict() == TABLE.to_pydict()

    class Failing(ei.Backend):
        name, kind = "failing-s3", "vector"

        def execute(self, plan):
            raise OSError("disk on fire")

        def execute_stream(self, plan):
            yield pa.record_batch([pa.array(["z"]), pa.array([1]), pa.array([1.0])], schema=TABLE.schema)
            raise OSError("disk on fire")

    registry.register_backend("failing-s3", Failing())
    try:
        for target in ("s3://bkt/out/t.parquet", "s3://bkt/out/new.parquet"):
            with pytest.raises(ExecutionError, match="disk on fire"):
                flow.write_parquet(target, engine="failing-s3", storage_options=options)
    finally:
        registry.unregister_backend("failing-s3")
    assert ei.read_parquet("s3://bkt/out/t.parquet", storage_options=options).run().to_pydict() == TABLE.to_pydict()
    assert fs.get_file_info("bkt/out/new.parquet").type == pafs.FileType.NotFound
    with pytest.raises(PlanError, match="partition_by writes a local folder"):
        flow.write_parquet("s3://bkt/out/p", partition_by="k", storage_options=options)


def test_credentials_never_show(objects, monkeypatch):
    flow = ei.read_csv("s3://bkt/t.csv", storage_options=objects).filter(col("n") > 1)
    shown = [flow.explain(), repr(flow), repr(flow.plan), flow.to_json(), str(flow.plan)]
    with pytest.raises(EidosError) as error:
        ei.read_parquet("s3://bkt/missing.parquet", storage_options=objects)
    shown.append(str(error.value))
    with pytest.raises(PlanError) as error:
        ei.read_parquet(f"s3://eidos-test:{SECRET}@bkt/t.parquet")
    shown.append(str(error.value))
    with pytest.raises(PlanError) as error:
        ei.read_csv("s3://bkt/t.csv", storage_options={**objects, "aws_secret": SECRET})
    shown.append(str(error.value))
    assert not [text for text in shown if SECRET in text]
    # A plan read back carries no credentials: it runs with the process's own (the standard chain).
    text = flow.to_json()
    for name, value in [("AWS_ACCESS_KEY_ID", "eidos-test"), ("AWS_SECRET_ACCESS_KEY", SECRET),
                        ("AWS_ENDPOINT_URL", objects["aws_endpoint_url"]), ("AWS_DEFAULT_REGION", "us-east-1")]:
        monkeypatch.setenv(name, value)
    assert ei.Flow.from_json(text).run().to_pydict() == {"k": ["b", None], "n": [2, 3], "x": [-1.0, None]}
    assert ei.read_ipc("s3://bkt/t.arrow").run().to_pydict() == TABLE.to_pydict()


def test_gs_reaches_only_its_endpoint_and_says_why_it_failed():
    # No GCS server runs here: this is the error path, against a port where nothing listens.
    options = {"google_anonymous": True, "google_endpoint_url": f"http://127.0.0.1:{_free_port()}", "timeout": 1}
    with pytest.raises(PlanError, match="cannot read 'gs://bkt/t.parquet'"):
        ei.read_parquet("gs://bkt/t.parquet", storage_options=options)


# ---------------------------------------------------------------- http(s)

@pytest.fixture(scope="module")
def web(tmp_path_factory):
    folder = tmp_path_factory.mktemp("web")
    pq.write_table(TABLE, folder / "t.parquet")
    (folder / "t.csv").write_text("k,n\na,1\n")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path == "/moved.csv":
                self.send_response(302)
                self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
                self.end_headers()
                return
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_http_needs_an_explicit_allow_and_follows_no_redirect(web):
    with pytest.raises(PlanError, match="is plain http; reading it needs storage_options"):
        ei.read_parquet(f"{web}/t.parquet")
    allow = {"allow_http": True}
    flow = ei.read_parquet(f"{web}/t.parquet", storage_options=allow).filter(col("n") >= 2)
    assert flow.run().to_pydict() == {"k": ["b", None], "n": [2, 3], "x": [-1.0, None]}
    assert ei.read_csv(f"{web}/t.csv", storage_options=allow).run(engine="duckdb").to_pydict() == \
        {"k": ["a"], "n": [1]}
    with pytest.raises(PlanError, match="answered with a redirect .*follows none"):
        ei.read_csv(f"{web}/moved.csv", storage_options=allow)
    with pytest.raises(PlanError, match="cannot read .*HTTP 404"):
        ei.read_csv(f"{web}/none.csv", storage_options=allow)


def test_a_plan_from_json_reaches_only_allowed_urls(web):
    text = ei.read_csv(f"{web}/t.csv", storage_options={"allow_http": True}).to_json()
    with pytest.raises(PlanError, match=r"plan JSON at plan.source.path: the plan reads .* a URL outside those "
                                        r"this process lets plans reach .*allowed_urls=\('http://127"):
        ei.Flow.from_json(text)
    assert ei.Flow.from_json(text, allowed_urls=(f"{web}/",)).schema.names == ("k", "n")
    for allowed in (f"{web}/data/", "http://127.0.0.2/", f"https://{web[7:]}/"):
        with pytest.raises(PlanError, match="a URL outside those"):
            ei.Flow.from_json(text, allowed_urls=(allowed,))
    sneaky = text.replace("/t.csv", "/data/../t.csv")
    with pytest.raises(PlanError, match="a URL outside those"):
        ei.Flow.from_json(sneaky, allowed_urls=(f"{web}/data/",))
    for scheme in ("file:///etc/passwd", "ftp://host/x.csv"):
        with pytest.raises(PlanError, match="not (file|ftp):// paths"):
            ei.Flow.from_json(text.replace(f"{web}/t.csv", scheme))


def test_the_command_reads_a_plans_urls_only_when_allowed(web, tmp_path, capsys):
    from eidos.cli import main

    plan = tmp_path / "plan.json"
    plan.write_text(ei.read_csv(f"{web}/t.csv", storage_options={"allow_http": True}).to_json())
    assert main(["explain", str(plan)]) == 1
    assert "a URL outside those this process lets plans reach" in capsys.readouterr().err
    assert main(["explain", str(plan), "--allow-url", f"{web}/"]) == 0
    assert f"csv '{web}/t.csv'" in capsys.readouterr().out
