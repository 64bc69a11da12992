"""The data plane (eidos.remote: channel + TransferManager) beside raw sockets, on loopback, in one run.

A server subprocess (the honest set-up on a small machine: client and server are separate processes
with their own interpreter and GIL, as they would be across a network) runs the data channel (its
pool, sessions and `channel.listen`; a second listener with the staged fallback) and a raw-socket
server; this process is the client. Measured, raw and eidos taking turns sample by sample:

- throughput of PUT (client -> server pool, until acknowledged) and GET (server pool -> a client
  buffer) for 1 MiB to 1 GiB, against the raw baseline (`sendall` then a 1-byte ack / a request then
  `recv_into` a preallocated buffer, TCP_NODELAY; and the same reading at most 256 KiB a call, as
  TcpTransport does); each sample moves at least 64 MiB (small sizes
  repeat, every transfer of the sample in flight at once on both sides: PUTs then one flush, GETs by
  `get_many`; "one at a time" is a round trip per GET on both sides), after one warm-up sample (it
  faults the pool's pages in);
- pool allocation: allocate + free of random sizes (64 B to 16 MiB) with 1,000 blocks live, in-process;
- set-up per transfer: many 0-byte and 1-byte PUTs pipelined (put all, then flush), per transfer, and
  sequential put+wait round trips beside a raw 1-byte round trip;
- the staged fallback: GET received into a staging buffer and copied (client `staged=True`) and PUT
  received by the server into a staging buffer and copied into the block (`listen(staged=True)`),
  against the direct paths;
- with CUDA: host-to-device copies from a pinned pool block against pageable memory;
- the whole service (`eidos serve` in a subprocess): a control round trip, run_subgraph of a cached
  program beside the same program run here, bulk bytes through Arrow Flight against the data channel,
  and a tensor chain on the service ("remote:gpu", end to end and with the data already there) beside
  the same chain run in this process on the same machine (the GPU where there is one).

    python bench/remote.py [--quick] [--samples 5] [--link]

`--link` runs the same with the server and the client in two network namespaces joined by a veth pair
(as root), the figures of a real network stack between two hosts without the wire.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

import numpy as np

MiB, GiB = 1 << 20, 1 << 30
RAW = struct.Struct("<cQ")
PIECE = 256 << 10          # the "raw, 256 KiB reads" baseline reads as TcpTransport does
HOST = "127.0.0.1"         # where the server listens; --link: its end of the veth pair
SERVER = []                # what the server's command line starts with; --link: ["ip", "netns", "exec", B]


# ---- the server process ---------------------------------------------------------------------------

def serve(capacity: int) -> None:
    from eidos.remote.channel import listen
    from eidos.remote.pool import Pool
    from eidos.remote.store import Sessions

    pool = Pool(capacity)                               # pinned when CUDA is there, as a service's pool is
    sessions = Sessions(pool)
    direct = listen(HOST, 0, sessions, max_frame=capacity)
    staged = listen(HOST, 0, sessions, max_frame=capacity, staged=True)
    raw = socket.create_server((HOST, 0))
    threading.Thread(target=_raw_server, args=(raw, capacity), daemon=True).start()
    print(json.dumps({"direct": direct.port, "staged": staged.port, "raw": raw.getsockname()[1],
                      "pinned": pool.pinned}), flush=True)
    for line in sys.stdin:
        if line.strip() == "open":
            print(sessions.open().ticket.hex(), flush=True)
        else:
            break
    direct.close()
    staged.close()
    sessions.close()


def _raw_server(server: socket.socket, capacity: int) -> None:
    buffer = memoryview(bytearray(capacity))          # preallocated and touched, as the pool is after warm-up
    while True:
        sock, _ = server.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_raw_connection, args=(sock, buffer), daemon=True).start()


def _raw_connection(sock: socket.socket, buffer: memoryview) -> None:
    """Each transfer uses the next `n` bytes of the buffer (wrapping), as the pool gives each transfer its own
    block: k transfers of 1 MiB touch k MiB of memory on both sides, not one cache-warm MiB k times."""
    header = bytearray(RAW.size)
    cursor = 0
    while True:
        if not _recv_exact(sock, memoryview(header)):
            return
        op, n = RAW.unpack(header)
        cursor = 0 if cursor + n > buffer.nbytes else cursor
        view, cursor = buffer[cursor:cursor + n], cursor + n
        if op in (b"P", b"p"):
            _recv_exact(sock, view, PIECE if op == b"p" else 0)
            sock.sendall(b"k")
        elif op == b"G":
            sock.sendall(view)
        else:
            return


def _recv_exact(sock: socket.socket, view: memoryview, piece: int = 0) -> bool:
    got, want = 0, view.nbytes
    while got < want:
        n = sock.recv_into(view[got:], min(want - got, piece) if piece else 0)
        if n == 0:
            return False
        got += n
    return True


# ---- the client -----------------------------------------------------------------------------------

class Raw:
    """The baseline client: `piece` 0 reads with one recv_into per call for all that is left (the plain
    loop), else at most `piece` bytes a call (the server reads PUTs the same way)."""

    def __init__(self, port: int, piece: int = 0):
        self.sock = socket.create_connection((HOST, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.ack = bytearray(1)
        self.piece = piece
        self.op = b"p" if piece else b"P"

    def put(self, data: memoryview, k: int) -> None:
        for _ in range(k):
            self.sock.sendall(RAW.pack(self.op, data.nbytes))
            self.sock.sendall(data)
        for _ in range(k):
            _recv_exact(self.sock, memoryview(self.ack))

    def get(self, out: memoryview, k: int) -> None:
        self.sock.sendall(RAW.pack(b"G", out.nbytes) * k)    # every request in flight, as get_many's
        for _ in range(k):
            _recv_exact(self.sock, out, self.piece)

    def get_one_at_a_time(self, out: memoryview, k: int) -> None:
        for _ in range(k):
            self.sock.sendall(RAW.pack(b"G", out.nbytes))
            _recv_exact(self.sock, out, self.piece)


def _manager(server, port: int, **options):
    from eidos.remote.transfer import TransferManager
    from eidos.remote.transport import TcpTransport

    server.stdin.write("open\n")
    server.stdin.flush()
    ticket = bytes.fromhex(server.stdout.readline().strip())
    tm = TransferManager(TcpTransport.connect(HOST, port, timeout=60), timeout=60, **options)
    tm.hello(ticket)
    return tm


def _eidos_put(tm, data, k: int) -> None:
    ids = [tm.put(data) for _ in range(k)]
    tm.flush()
    return ids


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def throughput(raw, raw_pieces, tm, sizes, samples: int) -> list[tuple]:
    rows = []
    for size in sizes:
        data = np.full(size, 7, dtype=np.uint8).data
        out = np.zeros(size, dtype=np.uint8).data
        k = max(1, 64 * MiB // size)
        for direction in ("PUT", "GET", "GET one at a time") if k > 1 else ("PUT", "GET"):
            times = {"raw": [], "raw pieces": [], "eidos": []}
            if direction != "PUT":
                sources = _eidos_put(tm, data, k)
            for i in range(samples + 1):                     # sample 0 warms up
                if direction == "PUT":
                    t_raw = _timed(lambda: raw.put(data, k))
                    t_pieces = _timed(lambda: raw_pieces.put(data, k))
                    ids = []
                    t_eidos = _timed(lambda: ids.extend(_eidos_put(tm, data, k)))
                    for ident in ids:
                        tm.release(ident)
                    tm.flush()
                elif direction == "GET":
                    t_raw = _timed(lambda: raw.get(out, k))
                    t_pieces = _timed(lambda: raw_pieces.get(out, k))
                    t_eidos = _timed(lambda: tm.get_many(sources, [out] * k))
                else:
                    t_raw = _timed(lambda: raw.get_one_at_a_time(out, k))
                    t_pieces = _timed(lambda: raw_pieces.get_one_at_a_time(out, k))
                    t_eidos = _timed(lambda: [tm.get(ident, out=out) for ident in sources])
                if i:
                    times["raw"].append(t_raw / k)
                    times["raw pieces"].append(t_pieces / k)
                    times["eidos"].append(t_eidos / k)
            if direction != "PUT":
                assert bytes(out[:16]) == bytes(data[:16])
                for ident in sources:
                    tm.release(ident)
                tm.flush()
            rows.append((size, direction, times))
    return rows


def pool_allocation(quick: bool) -> tuple[list[float], list[float]]:
    from eidos.remote.pool import Pool

    rng = random.Random(0)
    pool = Pool(4 * GiB, pinned=False)                  # address space only: nothing is touched
    sizes = [int(64 * 2 ** rng.uniform(0, 18)) for _ in range(20_000)]
    live = [pool.allocate(s, "bench") for s in sizes[:1000]]
    per_alloc, per_free = [], []
    batch = 100
    for start in range(1000, 1000 + (2000 if quick else 10_000), batch):
        t0 = time.perf_counter()
        blocks = [pool.allocate(s, "bench") for s in sizes[start:start + batch]]
        t1 = time.perf_counter()
        for b in blocks:
            pool.free(b)
        t2 = time.perf_counter()
        per_alloc.append((t1 - t0) / batch)
        per_free.append((t2 - t1) / batch)
        rng.shuffle(live)                               # churn the live set so free pieces stay scattered
        pool.free(live.pop())
        live.append(pool.allocate(sizes[start], "bench"))
    return per_alloc, per_free


def setup_cost(raw, tm, quick: bool, samples: int) -> dict[str, list[float]]:
    n = 2000 if quick else 10_000
    seq = 300 if quick else 1000
    out: dict[str, list[float]] = {"pipelined 0-byte PUT": [], "pipelined 1-byte PUT": [],
                                   "sequential 1-byte PUT+wait": [], "raw 1-byte round trip": []}
    one = memoryview(b"x")
    for _ in range(samples):
        for label, payload in (("pipelined 0-byte PUT", b""), ("pipelined 1-byte PUT", b"x")):
            ids = []
            t = _timed(lambda: ids.extend(_eidos_put(tm, payload, n)))
            out[label].append(t / n)
            for ident in ids:
                tm.release(ident)
            tm.flush()
        ids = []

        def sequential():
            for _ in range(seq):
                ident = tm.put(b"x")
                tm.wait(ident)
                ids.append(ident)

        out["sequential 1-byte PUT+wait"].append(_timed(sequential) / seq)
        for ident in ids:
            tm.release(ident)
        tm.flush()
        out["raw 1-byte round trip"].append(_timed(lambda: raw.put(one, 1) or [raw.put(one, 1)
                                                                              for _ in range(seq - 1)]) / seq)
    return out


def staged(server, ports, raw_tm, size: int, samples: int) -> list[tuple]:
    data = np.full(size, 3, dtype=np.uint8).data
    out = np.zeros(size, dtype=np.uint8).data
    staged_client = _manager(server, ports["direct"], staged=True)
    staged_server = _manager(server, ports["staged"])
    rows = []
    times = {"direct": [], "staged": []}
    for i in range(samples + 1):
        ids = []
        t_direct = _timed(lambda: ids.append(_eidos_put(raw_tm, data, 1)[0]))
        raw_tm.release(ids[0])
        raw_tm.flush()
        t_staged = _timed(lambda: ids.append(_eidos_put(staged_server, data, 1)[0]))
        staged_server.release(ids[1])
        staged_server.flush()
        if i:
            times["direct"].append(t_direct)
            times["staged"].append(t_staged)
    rows.append(("PUT, server receives into a staging buffer and copies into the block", times))
    times = {"direct": [], "staged": []}
    source = raw_tm.put(data)
    source_staged = staged_client.put(data)
    raw_tm.wait(source)
    staged_client.wait(source_staged)
    for i in range(samples + 1):
        t_direct = _timed(lambda: raw_tm.get(source, out=out))
        t_staged = _timed(lambda: staged_client.get(source_staged, out=out))
        if i:
            times["direct"].append(t_direct)
            times["staged"].append(t_staged)
    rows.append(("GET, client receives into a staging buffer and copies into `out`", times))
    raw_tm.release(source)
    raw_tm.flush()
    staged_client.close()
    staged_server.close()
    return rows


def host_to_device(size: int, samples: int) -> list[tuple] | None:
    """Copy to the GPU from a pinned pool block and from pageable memory (None without CUDA)."""
    from eidos.remote.pool import Pool, cuda_present

    if not cuda_present():
        return None
    import torch

    device = torch.empty(size, dtype=torch.uint8, device="cuda")
    pool = Pool(size, pinned=True)
    block = pool.allocate(size, "bench")
    block.view[:] = np.full(size, 5, dtype=np.uint8).data
    pageable = torch.from_numpy(np.full(size, 5, dtype=np.uint8))
    rows = []
    for what, source in (("pinned pool block", block.tensor()), ("pageable memory", pageable)):
        times = []
        for i in range(samples + 1):
            torch.cuda.synchronize()
            start = time.perf_counter()
            device.copy_(source, non_blocking=True)
            torch.cuda.synchronize()
            if i:
                times.append(time.perf_counter() - start)
        rows.append((what, times))
    assert int(device[-1]) == 5
    return rows


# ---- the whole service: `eidos serve` in a subprocess, the client here --------------------------------------

def _serve_subprocess(env: dict, pool_mb: int):
    """`eidos serve` as a user starts it (a child process, a token file), and a connection to it."""
    import tempfile

    import eidos as ei

    folder = tempfile.mkdtemp(prefix="eidos-bench-")
    token = "bench-token-" + os.urandom(12).hex()
    path = os.path.join(folder, "token")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(token)
    proc = subprocess.Popen([*SERVER, sys.executable, "-m", "eidos", "serve", "--host", HOST, "--port", "0",
                             "--token-file", path,
                             "--pool-mb", str(pool_mb)], stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if not line.startswith("eidos service at "):
        proc.kill()
        raise SystemExit(f"eidos serve did not start: {line!r}")
    return proc, ei.connect(line.split()[3], token=token, timeout=600)


def _tiny_program():
    from eidos import isa
    from eidos.isa import Address, Type

    def build(src, dst):
        return isa.ProgramBuilder().add(isa.ParallelMap(Address.buffer(dst), Address.buffer(src), 16,
                                                        isa.MapOperation.Neg, Type.F32)).build()
    return build


def small_calls(remote, samples: int, n: int = 200) -> dict[str, list[float]]:
    """Per call: a control round trip (health), run_subgraph of a cached 16-element program on the service's
    cpu target, and the same program executed by a cpu target in this process."""
    from eidos.isa import LaunchConfig, registry
    from eidos.isa.serialize import to_dict

    build = _tiny_program()
    src, dst = (h.meta["target_buffer"] for h in remote.run_subgraph(
        {"kind": "isa", "target": "cpu", "ops": [{"op": "allocate", "bytes": 64, "type": "f32"}] * 2}))
    program = build(src, dst)
    remote.run_subgraph({"kind": "isa", "target": "cpu", "ops": [{"op": "execute", "program": to_dict(program),
                                                                    "config": {"block": [16, 1, 1]}}]})
    cached = {"kind": "isa", "target": "cpu", "id": "bench",
              "ops": [{"op": "execute", "program_key": program.digest(), "config": {"block": [16, 1, 1]}}]}
    local = registry.create("cpu")
    lsrc, ldst = local.allocate_buffer(64), local.allocate_buffer(64)
    lprog = build(lsrc, ldst)
    config = LaunchConfig((1, 1, 1), (16, 1, 1))
    local.execute_program(lprog, config)
    out: dict[str, list[float]] = {"control round trip (health)": [], "run_subgraph, cached program": [],
                                   "the same program run here": []}
    for _ in range(samples):
        out["control round trip (health)"].append(_per(lambda: remote.health(), n))
        out["run_subgraph, cached program"].append(_per(lambda: remote.run_subgraph(cached), n))
        out["the same program run here"].append(_per(lambda: local.execute_program(lprog, config), n))
    return out


def _clocked(into: list, fn):
    """fn(), its time appended to `into`."""
    start = time.perf_counter()
    result = fn()
    into.append(time.perf_counter() - start)
    return result


def _per(fn, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def flight_bulk(remote, size: int, samples: int) -> dict[str, list[float]]:
    """Bulk bytes on the control plane (a one-column Arrow table through Flight do_put/do_get) beside the
    data channel (put_buffer / fetch_result into a buffer): why buffers have a channel of their own."""
    import pyarrow as pa

    data = np.random.default_rng(1).integers(0, 2**62, size // 8, dtype=np.int64)
    table = pa.table({"x": data})
    out = np.empty_like(data)
    t: dict[str, list[float]] = {"Flight do_put": [], "channel PUT": [], "Flight do_get": [], "channel GET": []}
    for _ in range(samples + 1):                       # the first round warms both paths up
        h = _clocked(t["Flight do_put"], lambda: remote.put_table(table))
        _clocked(t["Flight do_get"], lambda: remote.fetch_result(h))
        remote.release(h)
        b = _clocked(t["channel PUT"], lambda: remote.put_buffer(data))
        _clocked(t["channel GET"], lambda: remote.fetch_result(b, out))
        remote.release(b)
    return {k: v[1:] for k, v in t.items()}


def tensor_chain(remote, elements: int, samples: int) -> tuple[str, dict[str, list[float]]]:
    """A fused chain and its sum, end to end (host data in, a scalar out) and with the data already on the
    device: on the service ('remote:gpu') beside the same chain run in this process on the same machine
    ('gpu' where CUDA is, else 'cpu')."""
    import eidos as ei
    from eidos.remote.tensors import server_device

    here = server_device()              # what the service computes on, on this same machine
    x = np.random.default_rng(2).random(elements, dtype=np.float32)

    def chain(t):
        return (((t * 2 + 1).exp() / 3).sqrt()).sum().numpy()

    expected = chain(ei.tensor(x).to(here))
    rx, lx = ei.tensor(x).to("remote:gpu"), ei.tensor(x).to(here)
    np.testing.assert_allclose(chain(rx), expected, rtol=1e-5)
    t: dict[str, list[float]] = {f"end to end, {here} here": [], "end to end, remote:gpu": [],
                                 f"data resident, {here} here": [], "data resident, remote:gpu": []}
    for _ in range(samples):
        _clocked(t[f"end to end, {here} here"], lambda: chain(ei.tensor(x).to(here)))
        _clocked(t["end to end, remote:gpu"], lambda: chain(ei.tensor(x).to("remote:gpu")))
        _clocked(t[f"data resident, {here} here"], lambda: chain(lx))
        _clocked(t["data resident, remote:gpu"], lambda: chain(rx))
    return here, t


def service_section(env: dict, size: int, samples: int, quick: bool) -> None:
    """The figures of the whole service (`eidos serve` in a subprocess): calls, Flight against the channel
    for bulk bytes, a tensor chain on the service against the same chain here."""
    proc, remote = _serve_subprocess(env, pool_mb=(3 * size) // MiB + 64)
    try:
        calls = small_calls(remote, samples)
        print("\n## small calls (eidos serve in a subprocess; per call, min and median of "
              f"{samples} batches of 200)\n")
        print("| call | min us | median us |")
        print("| --- | ---: | ---: |")
        for what, t in calls.items():
            print(f"| {what} | {min(t) * 1e6:.1f} | {statistics.median(t) * 1e6:.1f} |")
        bulk = flight_bulk(remote, size, samples)
        print(f"\n## bulk bytes: the control plane (Arrow Flight) against the data channel ({label(size)}, "
              f"min and median of {samples})\n")
        print("| path | GB/s (best) | median s |")
        print("| --- | ---: | ---: |")
        for what, t in bulk.items():
            print(f"| {what} | {gbps(size, min(t)):.2f} | {statistics.median(t):.4f} |")
        elements = (size // 4) if not quick else (16 * MiB) // 4
        here, chain = tensor_chain(remote, elements, samples)
        print(f"\n## a tensor chain, ((x * 2 + 1).exp() / 3).sqrt().sum() over {elements:,} float32 "
              f"(service computes on {here}; min and median of {samples})\n")
        print("| run | min s | median s |")
        print("| --- | ---: | ---: |")
        for what, t in chain.items():
            print(f"| {what} | {min(t):.4f} | {statistics.median(t):.4f} |")
    finally:
        remote.close()
        proc.terminate()
        proc.wait(30)


def gbps(size: int, seconds: float) -> float:
    return size / seconds / 1e9


def label(size: int) -> str:
    return f"{size // GiB} GiB" if size >= GiB else f"{size // MiB} MiB"


def over_a_link(argv: list[str]) -> int:
    """This bench again with the server in one network namespace and the client in another, joined by a veth
    pair (the kernel's network stack both ways, as between two machines, with no wire in between)."""
    if os.geteuid() != 0:
        raise SystemExit("--link makes network namespaces, which needs root")
    tag = f"eidos-b{os.getpid()}"
    a, b, va, vb = f"{tag}-a", f"{tag}-b", f"{tag[-9:]}a", f"{tag[-9:]}b"
    steps = [["ip", "netns", "add", a], ["ip", "netns", "add", b],
             ["ip", "link", "add", va, "type", "veth", "peer", "name", vb],
             ["ip", "link", "set", va, "netns", a], ["ip", "link", "set", vb, "netns", b],
             ["ip", "-n", a, "addr", "add", "10.78.0.1/24", "dev", va],
             ["ip", "-n", b, "addr", "add", "10.78.0.2/24", "dev", vb],
             *[["ip", "-n", ns, "link", "set", dev, "up"] for ns, dev in ((a, va), (b, vb), (a, "lo"), (b, "lo"))]]
    try:
        for step in steps:
            subprocess.run(step, check=True)
        inner = [x for x in argv if x != "--link"]
        print(f"# over a veth pair between network namespaces {a} (client, 10.78.0.1) and {b} (server, 10.78.0.2)")
        sys.stdout.flush()
        return subprocess.run(["ip", "netns", "exec", a, sys.executable, os.path.abspath(__file__), *inner,
                               "--host", "10.78.0.2", "--server-netns", b]).returncode
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="sizes to 256 MiB, fewer samples (about 20 s)")
    ap.add_argument("--samples", type=int, default=None, help="timed samples per figure (default 5, quick 3)")
    ap.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--link", action="store_true",
                    help="server and client in two network namespaces joined by a veth pair (needs root)")
    ap.add_argument("--host", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--server-netns", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    global HOST, SERVER
    if args.host:
        HOST = args.host
    if args.server_netns:
        SERVER = ["ip", "netns", "exec", args.server_netns]
    if args.serve is not None:
        serve(args.serve)
        return
    if args.link:
        sys.exit(over_a_link(sys.argv[1:]))
    samples = args.samples or (3 if args.quick else 5)
    sizes = [MiB, 16 * MiB, 256 * MiB] + ([] if args.quick else [GiB])
    capacity = max(sizes) + 64 * MiB
    began = time.perf_counter()
    import eidos.remote

    env = dict(os.environ)                              # the server imports the eidos this process imported
    here = os.path.dirname(os.path.dirname(os.path.dirname(eidos.remote.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([here, env.get("PYTHONPATH", "")])
    server = subprocess.Popen([*SERVER, sys.executable, os.path.abspath(__file__), "--serve", str(capacity),
                               "--host", HOST],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        ports = json.loads(server.stdout.readline())
        raw, raw_pieces = Raw(ports["raw"]), Raw(ports["raw"], PIECE)
        tm = _manager(server, ports["direct"])
        print(f"# bench/remote.py{' --quick' if args.quick else ''}: {platform.node()}, {os.cpu_count()} CPUs, "
              f"Python {platform.python_version()}; server in a subprocess "
              f"{'on loopback' if HOST == '127.0.0.1' else 'at ' + HOST + ' in namespace ' + SERVER[-1]}, its pool "
              f"{'pinned' if ports['pinned'] else 'not pinned (no CUDA)'}; load average {os.getloadavg()[0]:.1f} "
              "at the start")
        rows = throughput(raw, raw_pieces, tm, sizes, samples)
        print("\n## throughput (GB/s = 1e9 bytes/s; per transfer, min and median of "
              f"{samples} samples of at least 64 MiB each)\n")
        print("| size | op | raw GB/s (best) | raw 256 KiB reads GB/s (best) | eidos GB/s (best) | eidos median s "
              "| eidos/raw (best) | eidos/raw (median) | eidos/raw 256 KiB reads (median) |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for size, direction, t in rows:
            r, p, e = min(t["raw"]), min(t["raw pieces"]), min(t["eidos"])
            rm, pm, em = (statistics.median(t[x]) for x in ("raw", "raw pieces", "eidos"))
            print(f"| {label(size)} | {direction} | {gbps(size, r):.2f} | {gbps(size, p):.2f} | {gbps(size, e):.2f} "
                  f"| {em:.5f} | {r / e:.2f} | {rm / em:.2f} | {pm / em:.2f} |")

        per_alloc, per_free = pool_allocation(args.quick)
        print("\n## pool allocation (64 B to 16 MiB, 1,000 blocks live; per operation, batches of 100)\n")
        print("| operation | min us | median us | goal |")
        print("| --- | ---: | ---: | --- |")
        print(f"| allocate | {min(per_alloc) * 1e6:.2f} | {statistics.median(per_alloc) * 1e6:.2f} | < 100 us |")
        print(f"| free | {min(per_free) * 1e6:.2f} | {statistics.median(per_free) * 1e6:.2f} | |")

        cost = setup_cost(raw, tm, args.quick, samples)
        print("\n## set-up per transfer (client + server, per transfer)\n")
        print("| what | min us | median us |")
        print("| --- | ---: | ---: |")
        for what, t in cost.items():
            print(f"| {what} | {min(t) * 1e6:.1f} | {statistics.median(t) * 1e6:.1f} |")
        extra = statistics.median(cost["sequential 1-byte PUT+wait"]) - statistics.median(cost["raw 1-byte round trip"])
        print(f"\nsequential PUT+wait beyond the raw round trip (medians): {extra * 1e6:.1f} us")

        size = 64 * MiB if args.quick else 256 * MiB
        print(f"\n## staged fallback ({label(size)}, min and median of {samples})\n")
        print("| path | direct min s | staged min s | penalty (min) | penalty (median) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for what, t in staged(server, ports, tm, size, samples):
            d, s = min(t["direct"]), min(t["staged"])
            dm, sm = statistics.median(t["direct"]), statistics.median(t["staged"])
            print(f"| {what} | {d:.4f} | {s:.4f} | {s / d - 1:+.0%} | {sm / dm - 1:+.0%} |")
        tm.close()
        h2d = host_to_device(size, samples)
        if h2d is not None:
            print(f"\n## host to device ({label(size)}, torch copy_, min and median of {samples})\n")
            print("| from | min s | GB/s (best) | median s |")
            print("| --- | ---: | ---: | ---: |")
            for what, t in h2d:
                print(f"| {what} | {min(t):.4f} | {gbps(size, min(t)):.1f} | {statistics.median(t):.4f} |")
        service_section(env, size, samples, args.quick)
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end; {time.perf_counter() - began:.0f} s in all")
    finally:
        if server.poll() is None:
            server.stdin.write("stop\n")
            server.stdin.close()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


if __name__ == "__main__":
    main()
