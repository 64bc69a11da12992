"""The execution service and its client on loopback: the control plane's calls, what a session keeps,
the token, plans under the service's allowances, ISA operations, cancellation, and malformed messages."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import isa
from eidos.errors import BackendError, BackendUnavailable, EidosError, ExecutionError, PlanError
from eidos.isa import Address, Type
from eidos.isa.serialize import to_dict
from eidos.remote import protocol
from eidos.remote.client import connect
from eidos.testing.strategies import examples

from .conftest import TOKEN, start_service


def test_health_names_devices_memory_load_and_version(remote, service):
    h = remote.health()
    assert h.version == ei.__version__ and h.protocol == protocol.PROTOCOL
    assert h.devices["cpu_cores"] >= 1 and "reference" in h.devices["targets"]
    assert h.memory["pool_bytes"] == service.pool.capacity and h.memory["pinned"] is service.pool.pinned
    assert h.load["sessions"] >= 1 and len(h.load["loadavg"]) == 3


def test_ei_connect_is_the_client_and_becomes_current(service):
    with ei.connect(service.address, token=TOKEN) as r:
        assert ei.remote.current() is r and repr(r).startswith("<Remote eidos://127.0.0.1:")
    assert r.closed and ei.remote.current() is not r


@pytest.mark.parametrize("nbytes", [0, 1, 4095, 3 << 20])
def test_buffers_come_back_byte_for_byte_and_read_only(remote, nbytes):
    data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    h = remote.put_buffer(data)
    got = remote.fetch_result(h)
    assert got.readonly and bytes(got) == data.tobytes() and h.nbytes == nbytes
    out = bytearray(nbytes)
    remote.fetch_result(h, out)
    assert out == data.tobytes()


def test_tables_travel_as_arrow_and_stream_back(remote):
    table = pa.table({"k": ["a", None, "c"] * 1000, "x": np.arange(3000, dtype=np.float64)})
    h = remote.put_table(table)
    assert remote.fetch_result(h).equals(table)
    assert pa.Table.from_batches(list(remote.fetch_stream(h))).equals(table)


def test_release_frees_the_pool_and_a_released_handle_is_gone(remote, service):
    before = service.pool.used()
    h = remote.put_buffer(np.zeros(1 << 20, np.uint8))
    assert service.pool.used() >= before + (1 << 20)
    remote.release(h)
    assert service.pool.used() == before
    with pytest.raises(BackendError, match=f"no result or buffer {h.id}"):
        remote.fetch_result(h)


def test_closing_a_connection_frees_its_session(service):
    r = connect(service.address, token=TOKEN)
    r.put_buffer(np.ones(1 << 20, np.uint8))
    session = service.sessions.get(r.session)
    r.close()
    assert session.closed.wait(5)
    assert service.pool.used(session.id) == 0
    with pytest.raises(BackendError, match="closed"):
        r.health()


def test_a_plan_runs_there_and_its_result_stays_until_fetched(remote):
    flow = ei.from_pydict({"k": ["b", "a", "b"], "x": [1, 2, 3]}).group_by("k").agg(s=ei.col("x").sum()).sort("k")
    (h,) = remote.run_subgraph({"kind": "plan", "plan": flow.to_json()})
    assert h.kind == "table" and h.meta["rows"] == 2
    assert remote.fetch_result(h).to_pydict() == flow.run().to_pydict()


def test_a_plan_calls_only_functions_the_service_allows(remote):
    import math

    text = ei.from_pydict({"x": [4.0]}).select(r=ei.udf(math.sqrt, ei.Float64)("x")).to_json()
    with pytest.raises(PlanError, match="math:sqrt"):
        remote.run_subgraph({"kind": "plan", "plan": text})


def test_a_plan_reads_no_file_outside_the_allowed_folders(remote, tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1]}), tmp_path / "t.parquet")
    text = ei.read_parquet(str(tmp_path / "t.parquet")).to_json()
    with pytest.raises(PlanError, match="outside the folders this service opens"):
        remote.run_subgraph({"kind": "plan", "plan": text})


def test_allowed_folders_are_read(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "t.parquet")
    svc = start_service(pool_bytes=1 << 20, allowed_paths=(str(tmp_path),))
    try:
        with connect(svc.address, token=TOKEN) as r:
            (h,) = r.run_subgraph({"kind": "plan", "plan": ei.read_parquet(str(tmp_path / "t.parquet")).to_json()})
            assert r.fetch_result(h).to_pydict() == {"a": [1, 2]}
            (tmp_path / "t.ndjson").write_text('{"a": 3}\n')
            (h,) = r.run_subgraph({"kind": "plan", "plan": ei.read_ndjson(str(tmp_path / "t.ndjson")).to_json()})
            assert r.fetch_result(h).to_pydict() == {"a": [3]}
    finally:
        svc.shutdown()


# ---- ISA operations ----------------------------------------------------------------------------------------

def _negate(src: int, dst: int, n: int):
    return isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(dst), Address.buffer(src), n,
                                                    isa.MapOperation.Neg, Type.F32)).build()


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_isa_operations_run_on_the_sessions_target_and_match_the_reference(remote, target):
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    data = remote.put_buffer(x)
    src, dst = (h.meta["target_buffer"] for h in remote.run_subgraph(
        {"kind": "isa", "target": target, "ops": [{"op": "allocate", "bytes": x.nbytes, "type": "f32"}] * 2}))
    program = _negate(src, dst, x.size)
    ops = [{"op": "write", "buffer": src, "offset": 0, "data": data.id},
           {"op": "execute", "program": to_dict(program), "config": {"grid": [1, 1, 1], "block": [64, 1, 1]}},
           {"op": "read", "buffer": dst, "offset": 0, "bytes": x.nbytes}]
    run, out = remote.run_subgraph({"kind": "isa", "target": target, "ops": ops})
    assert run.meta["program_key"] == program.digest()
    np.testing.assert_array_equal(np.frombuffer(remote.fetch_result(out), np.float32), -x)
    again = [{"op": "execute", "program_key": program.digest()}, ops[2]]     # a cached program: only its key
    _, out2 = remote.run_subgraph({"kind": "isa", "target": target, "ops": again})
    assert bytes(remote.fetch_result(out2)) == bytes(remote.fetch_result(out))


def test_isa_errors_name_the_op(remote):
    with pytest.raises(PlanError, match=r"ops\[0\]: unknown op 'launch'"):
        remote.run_subgraph({"kind": "isa", "ops": [{"op": "launch"}]})
    with pytest.raises(PlanError, match="no program"):
        remote.run_subgraph({"kind": "isa", "ops": [{"op": "execute", "program_key": "ab" * 32}]})
    with pytest.raises(PlanError, match="not offered"):
        remote.run_subgraph({"kind": "isa", "target": "triton-but-not-here", "ops": []})
    with pytest.raises(EidosError, match="format"):
        remote.run_subgraph({"kind": "isa", "ops": [{"op": "execute", "program": {"format": "nope"}}]})


def _spin(iterations: int):
    """A program whose one thread loops `iterations` times (long on the reference interpreter)."""
    b = isa.ProgramBuilder()
    b.add(isa.MOV_IMM(isa.Register(7), 0, Type.I64))
    top = b.label("top")
    b.add(isa.LOOP(isa.Register(7), iterations, top), isa.EXIT())
    return b.build()


def test_cancel_stops_a_long_program_in_flight(remote, service):
    plan_id = remote.new_plan_id()
    ops = [{"op": "execute", "program": to_dict(_spin(9_000_000))}]
    failure: list[BaseException] = []

    def run():
        try:
            remote.run_subgraph({"kind": "isa", "target": "reference", "id": plan_id, "ops": ops})
        except BaseException as e:  # noqa: BLE001 - the test reads it
            failure.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 10
    while not remote.cancel(plan_id):
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.01)
    thread.join(10)
    assert not thread.is_alive()
    assert isinstance(failure[0], ExecutionError) and "cancelled" in str(failure[0])
    assert remote.cancel(plan_id) is False          # no longer running
    assert remote.health().load["running"] == 0


# ---- the token, the address, malformed messages ---------------------------------------------------------------

def test_nothing_runs_without_the_token(service):
    with pytest.raises(PlanError, match="refused the token") as e:
        connect(service.address, token="wrong-token-0123456789")
    assert "wrong-token" not in str(e.value)
    with pytest.raises(PlanError, match="at least 16"):
        connect(service.address, token="short")
    raw = flight.connect(f"grpc+tcp://127.0.0.1:{service.port}")
    with pytest.raises(flight.FlightUnauthenticatedError):
        list(raw.do_action(flight.Action("health", b"{}")))


def test_a_bad_address_is_named(service):
    with pytest.raises(PlanError, match="eidos://host:port"):
        connect("http://127.0.0.1:1", token=TOKEN)
    with pytest.raises(BackendUnavailable, match="cannot be reached"):
        connect("eidos://127.0.0.1:1", token=TOKEN, timeout=3)


def _raw(service):
    client = flight.connect(f"grpc+tcp://127.0.0.1:{service.port}")
    return client, flight.FlightCallOptions(timeout=10, headers=[(b"authorization", f"Bearer {TOKEN}".encode())])


def _error_class(service, action: str, body: bytes) -> str | None:
    client, options = _raw(service)
    try:
        list(client.do_action(flight.Action(action, body), options))
    except flight.FlightServerError as e:
        return json.loads(e.extra_info)["error"]
    finally:
        client.close()
    return None


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                     max_leaves=8)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(action=st.sampled_from([*protocol.ACTIONS, "nope"]),
       body=st.one_of(st.binary(max_size=40), _json.map(lambda v: json.dumps(v).encode()),
                      st.dictionaries(st.sampled_from(["session", "fragment", "protocol", "handles", "plan_id",
                                                       "kind", "ops"]), _json, max_size=4)
                      .map(lambda v: json.dumps(v).encode())))
def test_malformed_control_messages_are_eidos_errors_and_the_service_lives_on(service, action, body):
    if action == "open_session":
        return     # a well-formed one opens a session: covered by every connect
    error = _error_class(service, action, body)
    assert error is None or error in {"PlanError", "BackendError", "UnsupportedError", "IsaError"}
    assert _error_class(service, "health", b"{}") is None


def test_error_bodies_build_only_eidos_errors():
    e = protocol.error_from(json.dumps({"error": "SystemExit", "message": "x"}).encode(), "fallback")
    assert type(e) is ExecutionError and str(e) == "x"
    assert type(protocol.error_from(b"not json", "fallback")) is ExecutionError
    assert type(protocol.error_from(json.dumps({"error": "PlanError", "message": "m"}).encode(), "f")) is PlanError


def test_a_run_sent_before_its_input_starts_when_the_input_arrives(remote):
    x = np.arange(1 << 20, dtype=np.float32)
    data = remote.put_buffer(x, wait=False)             # still in flight when the run is sent
    (src,) = remote.run_subgraph({"kind": "isa", "ops": [{"op": "allocate", "bytes": x.nbytes, "type": "f32"}]})
    buf = src.meta["target_buffer"]
    ops = [{"op": "write", "buffer": buf, "offset": 0, "data": data.id},
           {"op": "read", "buffer": buf, "offset": 0, "bytes": x.nbytes}]
    (out,) = remote.run_subgraph({"kind": "isa", "ops": ops})
    assert bytes(remote.fetch_result(out)) == x.tobytes()
    remote.release(data)
    with pytest.raises(BackendError, match=f"no result or buffer {data.id}"):   # released: fails at once
        remote.run_subgraph({"kind": "isa", "ops": ops[:1]})


def test_an_input_never_sent_fails_within_the_services_wait(service):
    svc = start_service(pool_bytes=1 << 20, input_wait=0.5)
    try:
        with connect(svc.address, token=TOKEN) as r:
            (src,) = r.run_subgraph({"kind": "isa", "ops": [{"op": "allocate", "bytes": 8}]})
            with pytest.raises(ExecutionError, match="input 77 was not sent within 0.5 s"):
                r.run_subgraph({"kind": "isa", "ops": [{"op": "write", "buffer": src.meta["target_buffer"],
                                                        "offset": 0, "data": 77}]})
    finally:
        svc.shutdown()


def test_per_connection_memory_limits_refuse_what_passes_them():
    from eidos.errors import ResourceError

    svc = start_service(pool_bytes=4 << 20, session_bytes=1 << 20)
    try:
        with connect(svc.address, token=TOKEN) as r:
            with pytest.raises(ResourceError, match="over the service's limit of 1,048,576 bytes"):
                r.put_buffer(np.zeros(2 << 20, np.uint8))
            with pytest.raises(ResourceError, match="passes this session's limit"):
                r.put_table(pa.table({"x": np.zeros(300_000)}))
            h = r.put_buffer(np.ones(1000, np.uint8))          # the session lives on
            assert bytes(r.fetch_result(h)) == b"\x01" * 1000
    finally:
        svc.shutdown()


def test_remote_table_is_a_flow_whose_plans_run_there(remote):
    pl = pytest.importorskip("polars")

    t = remote.table(pl.DataFrame({"k": ["a", "b", "a"], "x": [1, 2, 3]}))
    q = t.group_by("k").agg(s=ei.col("x").sum()).sort("k")
    assert q.run().to_pydict() == {"k": ["a", "b"], "s": [4, 2]}
    assert ei.last_run().lane == "remote"
    assert "remote" in q.explain().splitlines()[0]


def test_a_run_past_its_deadline_is_cancelled_on_the_service_too(remote, service):
    ops = [{"op": "execute", "program": to_dict(_spin(9_000_000))}]
    with pytest.raises(ExecutionError, match="deadline of 0.3 s"):
        remote.run_subgraph({"kind": "isa", "target": "reference", "ops": ops}, timeout=0.3)
    deadline = time.monotonic() + 10
    while remote.health().load["running"]:
        assert time.monotonic() < deadline, "the run went on after its deadline"
        time.sleep(0.05)


def test_results_made_there_count_toward_the_sessions_limit():
    from eidos.errors import ResourceError

    svc = start_service(pool_bytes=4 << 20, session_bytes=1 << 20)
    try:
        with connect(svc.address, token=TOKEN) as r:
            small = ei.from_pydict({"x": list(range(1000))})
            (h,) = r.run_subgraph({"kind": "plan", "plan": small.to_json()})
            assert svc.sessions.get(r.session).store.held == h.nbytes > 0
            big = r.table(pa.table({"x": np.zeros(100_000)}))                     # 800 KB held
            with pytest.raises(ResourceError, match="would pass this session's limit"):
                r.run_subgraph({"kind": "plan", "plan": big.select(y=ei.col("x") + 1).to_json()})
            r.release(h)
            assert svc.sessions.get(r.session).store.held == 800_000
    finally:
        svc.shutdown()


def test_a_signal_to_the_process_does_not_stop_a_service_in_it(remote):
    import os
    import signal

    previous = signal.signal(signal.SIGINT, lambda *_: None)   # the process handles Ctrl-C for other work
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert remote.health().protocol == protocol.PROTOCOL   # Flight's own serve() would have stopped the server
