"""Tensor graphs as JSON (eidos.remote.tensors): a decoded graph realizes to exactly the bytes of the original,
and a document that is not one encode makes gives an EidosError, never another exception."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos.errors import EidosError, PlanError, UnsupportedError
from eidos.remote import tensors as R
from eidos.tensor.array import Tensor
from eidos.testing.strategies import examples


class Uploads:
    """What a client's uploads would be: each realized tensor the encoder meets, under a new id."""

    def __init__(self) -> None:
        self.by_obj: dict[int, tuple[int, Tensor]] = {}
        self.calls = 0

    def __call__(self, t: Tensor) -> int:
        self.calls += 1
        return self.by_obj.setdefault(id(t), (len(self.by_obj) + 1, t))[0]

    def server(self) -> dict[int, Tensor]:
        """The server's copies: new tensors with the same bytes."""
        return {i: Tensor(np.array(t.numpy(), copy=True)) for i, t in self.by_obj.values()}


def round_trip(outs, text=True):
    up = Uploads()
    doc = R.encode(outs, up)
    if text:
        doc = json.dumps(doc, allow_nan=False)   # strict JSON: non-finite numbers travel as strings
    return R.decode(doc, up.server()), up


def same_bytes(a: Tensor, b: Tensor) -> None:
    assert (a.shape, a.dtype, a.device) == (b.shape, b.dtype, b.device)
    assert a.numpy().tobytes() == b.numpy().tobytes()


# ---- round trips ------------------------------------------------------------------------------------

NUMERIC = ["float32", "float64", "int32", "int64"]


def _step(name: str, t: Tensor, other: Tensor) -> Tensor:
    """One operation on t (other: a leaf of the original shape); t itself where the operation does not fit."""
    if name == "neg":
        return -t
    if name == "abs":
        return abs(t)
    if name == "square":
        return t * t                                  # a shared operand
    if name == "exp":
        return ei.tensor.exp(t)
    if name == "scale":
        return t * 3 + 1
    if name == "rsub":
        return 2 - t
    if name == "div":
        return t / 4
    if name == "other":
        return t + other if t.shape == other.shape else t - 1
    if name == "where":
        return ei.tensor.where(t > 1, t, 0)
    if name == "clip":
        return ei.tensor.clip(t, -1, None) if t.dtype.kind == "f" else ei.tensor.clip(t, -3, 3)
    if name == "cast32":
        return t.astype("float32")
    if name == "cast64":
        return t.astype("int64")
    if name == "sum" and t.ndim:
        return t.sum(axis=-1)
    if name == "max" and t.ndim and t.shape[0]:
        return t.max(axis=0, keepdims=True)
    if name == "mean" and t.ndim:
        return t.mean(axis=0)
    if name == "argmax" and t.ndim and t.size:
        return t.argmax(axis=-1)
    if name == "matmul" and t.ndim >= 2:
        return t @ t.mT
    if name == "reshape":
        return t.reshape(-1)
    if name == "transpose" and t.ndim >= 2:
        return ei.tensor.transpose(t)
    if name == "unsqueeze":
        return ei.tensor.expand_dims(t, 0)
    if name == "squeeze":
        return ei.tensor.squeeze(t)
    if name == "slice" and t.ndim:
        return t[::2]
    if name == "slice2" and t.ndim >= 2:
        return t[1:, ::-1]
    if name == "take" and t.ndim and t.shape[0]:
        return t[np.array([0, -1, 0])]
    if name == "mask" and t.ndim == 1:
        return t[np.arange(t.shape[0]) % 2 == 0]
    if name == "concat" and t.ndim:
        return ei.tensor.concat([t, t], axis=0)
    if name == "softmax" and t.ndim:
        return ei.tensor.softmax(t, axis=-1)
    return t


STEPS = ["neg", "abs", "square", "exp", "scale", "rsub", "div", "other", "where", "clip", "cast32", "cast64",
         "sum", "max", "mean", "argmax", "matmul", "reshape", "transpose", "unsqueeze", "squeeze", "slice",
         "slice2", "take", "mask", "concat", "softmax"]


@settings(max_examples=examples(60), deadline=None)
@given(dtype=st.sampled_from(NUMERIC), shape=st.sampled_from([(3, 4), (4, 4), (1, 5), (5,), (2, 3, 2)]),
       steps=st.lists(st.sampled_from(STEPS), min_size=1, max_size=8), seed=st.integers(0, 2**32 - 1))
def test_a_decoded_graph_realizes_to_the_same_bytes(dtype, shape, steps, seed):
    rng = np.random.default_rng(seed)
    data = rng.normal(0, 3, shape) if dtype.startswith("float") else rng.integers(-5, 6, shape)
    a, b = ei.tensor(data.astype(dtype)), ei.tensor(rng.integers(-5, 6, shape).astype(dtype))
    t, seen = a, []
    for s in steps:
        t = _step(s, t, b)
        seen.append(t)
    outs = [t, seen[len(seen) // 2]]                  # two outputs sharing a subgraph
    back, _ = round_trip(outs)
    for x, y in zip(outs, back):
        same_bytes(x, y)


def test_encoding_realizes_nothing_and_names_each_leaf_once():
    a = ei.tensor(np.arange(6.0).reshape(2, 3))
    x = a * 2
    y = x + x * x
    up = Uploads()
    doc = R.encode([y, x], up)
    assert not y.is_realized and not x.is_realized
    assert up.calls == 1
    ops = [n["op"] for n in doc["nodes"]]
    assert ops.count("leaf") == 1 and ops.count("mul") == 2 and ops.count("add") == 1   # x once
    assert doc["outputs"] == [ops.index("add"), ops.index("mul")]


def test_non_finite_constants_and_every_real_dtype_travel():
    for dt in ("bool", "int8", "uint8", "uint64", "float16", "bfloat16", "float32", "float64"):
        a = ei.tensor(np.array([0, 1, 0, 1]).astype(dt))
        t = (a == a) | (a != a) if dt == "bool" else ei.tensor.maximum(a, a) + a
        (back,), _ = round_trip([t])
        same_bytes(t, back)
    x = ei.tensor([1.0, np.nan, -np.inf, 5.0])
    t = ei.tensor.clip(x, 0.5, None) + ei.tensor.where(x > 2, np.inf, -0.0)
    (back,), _ = round_trip([t])
    same_bytes(t, back)


def test_layer_norm_and_a_leaf_output_travel():
    a = ei.tensor(np.random.default_rng(1).normal(size=(2, 3, 4)).astype("float32"))
    outs = [ei.tensor.layer_norm(a, (3, 4)), ei.tensor.layer_norm(a, 4, a[0, 0], a[1, 1]), a]
    back, _ = round_trip(outs)
    for x, y in zip(outs, back):
        same_bytes(x, y)


def test_complex_numbers_do_not_travel():
    z = ei.tensor([1 + 2j]) * 2
    with pytest.raises(UnsupportedError, match="complex"):
        R.encode([z], Uploads())
    with pytest.raises(UnsupportedError, match="host"):
        R.decode({"format": R.FORMAT, "version": 1, "outputs": [0],
                  "nodes": [{"op": "host", "args": [], "shape": [1], "dtype": "float64"}]}, {})


def test_run_decodes_moves_and_realizes():
    a = ei.tensor(np.arange(8, dtype=np.float32))
    up = Uploads()
    doc = R.encode([(a * 2).sum()], up)
    (out,) = R.run(doc, up.server(), "cpu")
    assert out.is_realized and out.device == "cpu" and out.item() == 56.0
    assert R.server_device() in ("cpu", "gpu")


# ---- malformed documents --------------------------------------------------------------------------------

def _doc():
    """A valid document of most node kinds, and the server's leaves for it."""
    a = ei.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    i = ei.tensor(np.arange(4, dtype=np.int64))
    t = ((a * 2 + 1).exp().sum(axis=1, keepdims=True) / 3.0) @ ei.tensor.expand_dims(a.mean(axis=0), 0)
    u = ei.tensor.concat([a.T.reshape(-1)[np.array([1, 2])], a[1:, ::2].reshape(-1)]).astype("int64") + (i >> 1)[:2].sum()
    up = Uploads()
    return R.encode([t, u, ei.tensor.softmax(ei.tensor.where(a > 3, a, 0.5), 0)], up), up.server()


DOC, LEAVES = _doc()


def decode_and_run(doc, **limits):
    """decode, then realize what it gave: EidosError or a result, nothing else."""
    try:
        outs = R.decode(doc, LEAVES, max_elements=limits.pop("max_elements", 1 << 16), **limits)
        for t in outs:
            t.realize()
    except EidosError as e:
        return e
    return outs


def test_the_fixture_document_is_valid():
    outs = decode_and_run(copy.deepcopy(DOC))
    assert isinstance(outs, list) and len(outs) == 3


def test_unknown_operations_are_named_with_the_ones_allowed():
    for op in ("__import__", "os.system", "eval", 7, None):
        doc = copy.deepcopy(DOC)
        doc["nodes"][2]["op"] = op
        e = decode_and_run(doc)
        assert isinstance(e, PlanError) and "unknown operation" in str(e) and "matmul" in str(e)


def test_cycles_and_forward_references_are_refused():
    doc = copy.deepcopy(DOC)
    i = next(i for i, n in enumerate(doc["nodes"]) if n["op"] == "exp")
    doc["nodes"][i]["args"] = [i]
    assert "earlier node" in str(decode_and_run(doc))
    doc["nodes"][i]["args"] = [len(doc["nodes"]) + 5]
    assert "no cycles" in str(decode_and_run(doc))


def test_huge_shapes_and_deep_graphs_are_refused_before_anything_is_made():
    doc = {"format": R.FORMAT, "version": 1, "outputs": [2], "nodes": [
        {"op": "leaf", "id": 1, "shape": [3, 4], "dtype": "float32"},
        {"op": "reshape", "args": [0], "shape": [3, 4, 1], "dtype": "float32"},
        {"op": "expand", "args": [1], "shape": [10**9, 3, 4, 10**9], "dtype": "float32"}]}
    e = decode_and_run(doc, max_elements=R.MAX_ELEMENTS)
    assert isinstance(e, PlanError) and "elements" in str(e)
    doc["nodes"][2]["shape"] = [2**20, 3, 4, 2**20]
    assert isinstance(decode_and_run(doc, max_elements=R.MAX_ELEMENTS), PlanError)
    a = ei.tensor([1.0])
    for _ in range(20):
        a = a.reshape((1, 1)).reshape((1,))
    up = Uploads()
    with pytest.raises(PlanError, match="deep"):
        R.decode(R.encode([a], up), up.server(), max_depth=30)


def test_a_node_over_the_services_memory_for_one_client_is_refused(service, remote):
    a = ei.tensor(np.ones(4, np.float32)).to("remote:gpu")
    big = ei.tensor.expand(a.reshape((1, 4)), (service.config.max_buffer // 16 + 1, 4))   # one byte over
    with pytest.raises(EidosError, match="more than the .* this service gives one client"):
        big.realize()
    assert (a * 2).sum().item() == 8.0


def test_a_leaf_must_match_the_tensor_it_names():
    doc = copy.deepcopy(DOC)
    doc["nodes"][0]["dtype"] = "float64"
    assert "leaf" in str(decode_and_run(doc))
    doc = copy.deepcopy(DOC)
    doc["nodes"][0]["id"] = 999
    assert "no leaf tensor has id 999" in str(decode_and_run(doc))


def _paths(v, here=()):
    yield here
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, (*here, k))
    elif isinstance(v, list):
        for k, x in enumerate(v):
            yield from _paths(x, (*here, k))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8)
    | st.sampled_from(["nan", "inf", "leaf", "const", "add", "reduce", "getitem", "...", "newaxis", "host"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6) | st.sampled_from(
        ["op", "args", "shape", "dtype", "slice", "array", "axes", "id"]), inner, max_size=4),
    max_leaves=12)
OPS = st.sampled_from([*R.OPS, "host", "leaf"])


@settings(max_examples=examples(100), deadline=None)
@given(data=st.data())
def test_mutated_documents_give_an_eidos_error_or_a_result(data):
    doc = copy.deepcopy(DOC)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        path = data.draw(st.sampled_from(paths))
        kind = data.draw(st.sampled_from(["replace", "delete", "op", "index", "shape", "swap"]))
        if not path:
            doc = data.draw(JSON)
            continue
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        last = path[-1]
        if kind == "delete":
            del parent[last]
        elif kind == "op" and isinstance(parent, dict):
            parent["op"] = data.draw(OPS)
        elif kind == "index":
            parent[last] = data.draw(st.integers(-3, len(DOC["nodes"]) + 3))
        elif kind == "shape":
            parent[last] = data.draw(st.lists(st.integers(0, 2**40) | st.integers(-2, 6), max_size=5))
        elif kind == "swap":
            other = data.draw(st.sampled_from(paths))
            value = doc
            for k in other:
                value = value[k]
            parent[last] = copy.deepcopy(value)
        else:
            parent[last] = data.draw(JSON)
    result = decode_and_run(doc)
    assert isinstance(result, (EidosError, list))
    assert R.decode(json.dumps(DOC), LEAVES)    # the module's state is untouched by what went before


@settings(max_examples=examples(50), deadline=None)
@given(text=st.text(max_size=40) | st.binary(max_size=40).map(lambda b: b))
def test_any_text_gives_an_eidos_error(text):
    with pytest.raises(EidosError):
        R.decode(text, LEAVES)


# ---- remote devices, against a service's session in this process ---------------------------------------

class InProcess:
    """A connection's calls answered by a session of this process (the service's store, pool and tensor runner
    without the network): what 'remote:gpu' tensors need of a connection."""

    address = "eidos://in-process"

    def __init__(self) -> None:
        from types import SimpleNamespace

        from eidos.remote.pool import Pool
        from eidos.remote.store import Session

        self.session = Session(Pool(1 << 24, pinned=False))
        self.config = SimpleNamespace(input_wait=1.0)
        self.next_id, self.runs, self.closed = 1, 0, False

    def put_buffer(self, data, *, wait=True):
        from eidos.remote.client import Handle

        view = memoryview(data).cast("B")
        entry = self.session.store.reserve(self.next_id, "buffer", view.nbytes)
        entry.block.view[:] = view
        self.session.store.complete(entry.id)
        self.next_id += 1
        return Handle.of(entry.handle())

    def run_subgraph(self, fragment: dict, timeout=None):
        from eidos.remote.client import Handle

        self.runs += 1
        fragment = json.loads(json.dumps(fragment, allow_nan=False))    # as the control plane carries it
        return [Handle.of(e.handle()) for e in R.run_fragment(fragment, self.session, self.config)]

    def fetch_result(self, handle) -> memoryview:
        from eidos.remote.channel import _bytes_of

        return _bytes_of(self.session.store.get(handle.id)).toreadonly()

    def release(self, *handles) -> None:
        for h in handles:
            self.session.store.release(h.id)


@pytest.fixture
def in_process(monkeypatch):
    import eidos.remote

    conn = InProcess()
    monkeypatch.setattr(eidos.remote, "current", lambda: conn, raising=False)
    yield conn
    conn.closed = True
    conn.session.close()


def test_remote_tensors_compute_on_the_service_and_keep_results_there(in_process):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    r = ei.tensor(x).to("remote:gpu")
    assert r.device == "remote:gpu" and r.is_realized
    y = (r * 2 + 1).sum(axis=1)
    assert not y.is_realized
    runs = in_process.runs
    y.realize()
    assert in_process.runs == runs + 1 and y.device == "remote:gpu"
    z = y / 3.0                                     # a later graph reads y where it is
    assert np.array_equal(z.numpy(), ((x * 2 + 1).sum(axis=1) / 3.0))
    assert np.array_equal(np.asarray(r @ r.T), x @ x.T)
    local = z.to("cpu")
    assert local.device == "cpu" and local.numpy().tobytes() == ((x * 2 + 1).sum(axis=1) / 3.0).tobytes()
    assert "remote:gpu" in repr(z) and "ran on eidos://in-process" in ei.tensor.explain(z)


def test_remote_results_match_local_ones_to_the_byte(in_process):
    a = ei.tensor(np.random.default_rng(3).normal(size=(4, 5)).astype("float32"))
    for f in (lambda t: ei.tensor.softmax(t * 3, axis=0), lambda t: ei.tensor.layer_norm(t), lambda t: t[1:, ::2].T,
              lambda t: ei.tensor.where(t > 0, t, 0).astype("int32").max(axis=1), lambda t: t.mean(axis=0) - t):
        same_bytes(f(a), f(a.to("remote:cpu")).to("cpu"))


def test_mixing_devices_and_unsupported_uses_are_errors(in_process):
    from eidos.errors import DeviceError

    r = ei.tensor([1.0, 2.0]).to("remote:gpu")
    with pytest.raises(DeviceError, match="different devices"):
        r + ei.tensor([1.0, 2.0])
    with pytest.raises(DeviceError):
        r[0] = 5.0
    with pytest.raises(DeviceError):
        r.__dlpack__()
    with pytest.raises(UnsupportedError, match="complex"):
        ei.tensor([1j]).to("remote:gpu")
    assert r.to("remote:cpu").device == "remote:cpu"
    with pytest.raises(DeviceError, match="remote:gpu"):
        ei.tensor([1.0]).to("remote:tpu")


def test_collected_remote_tensors_release_their_results(in_process):
    import gc

    r = ei.tensor(np.ones(8)).to("remote:gpu")
    t = (r + 1).realize()
    held = len(in_process.session.store)
    del t
    gc.collect()
    assert len(in_process.session.store) == held      # given back with the next call, not from the finalizer
    R.release_collected()
    assert len(in_process.session.store) == held - 1
    del r
    gc.collect()
    ei.tensor([1.0]).to("remote:gpu")               # its upload gives back what was collected before
    assert len(in_process.session.store) == held - 1


def test_no_connection_is_a_clear_error(monkeypatch):
    import eidos.remote
    from eidos.errors import BackendUnavailable

    monkeypatch.setattr(eidos.remote, "current", lambda: None, raising=False)
    with pytest.raises(BackendUnavailable, match="connect"):
        ei.tensor([1.0]).to("remote:gpu")


# ---- remote devices, against a service on loopback (tests/remote/conftest.py) ----------------------------

def test_a_tensor_chain_on_a_service_matches_the_local_one(remote):
    x = np.random.default_rng(7).normal(size=(64, 32)).astype("float32")
    local = ei.tensor(x).to(R.server_device())       # the service is this process: the same device, same kernels
    on = ei.tensor(x).to("remote:gpu")
    assert on.device == "remote:gpu"
    for f in (lambda t: ((t * 2 + 1).exp() / 3.0).sum(axis=1),
              lambda t: ei.tensor.softmax(t @ t.T, axis=-1)[::3],
              lambda t: ei.tensor.layer_norm(t).astype("float16").max(axis=0)):
        got = f(on)
        assert not got.is_realized
        same_bytes(f(local).to("cpu"), got.to("cpu"))
    y = (on * 3).realize()                       # the result stays on the service
    z = (y - on).sum()                            # and a later graph reads it there
    assert z.item() == float((ei.tensor(x) * 3 - ei.tensor(x)).sum().item())


def test_remote_tensor_errors_come_back_as_eidos_errors(remote):
    a = ei.tensor(np.ones((2, 3))).to("remote:gpu")
    with pytest.raises(EidosError):
        (a @ a).realize()                         # caught locally: shapes do not align
    doc = R.encode([a * 2], lambda t: t._data.id)
    doc["nodes"][0]["id"] = 12345                 # a handle the session does not hold
    with pytest.raises(EidosError, match="12345"):
        remote.run_subgraph({"kind": "tensor", "graph": doc})
    doc["nodes"][0] = {"op": "__import__", "args": [], "shape": [1], "dtype": "float64"}
    with pytest.raises(EidosError):
        remote.run_subgraph({"kind": "tensor", "graph": doc})
