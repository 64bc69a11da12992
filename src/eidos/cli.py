"""The `eidos` command: a thin shell over the public API (`import eidos`).

Tables and highlighting come from rich on a terminal; in a pipe the output is
plain aligned text, and progress is shown only on a terminal. An EidosError, or
an OSError (a bad path, a permission, a full disk), ends the command with
`error: <message>` on stderr and exit status 1; EIDOS_DEBUG=1 adds the
traceback. Any other exception is a bug in eidos and shows its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import decimal
import io
import json
import math
import os
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import eidos as ei
from eidos.errors import CommandError, EidosError, PlanError, UnsupportedError, shown
from eidos.flow.sinks import atomic

HEAD_DEFAULT = 20
FORMATS = {".parquet": "parquet", ".csv": "csv"}
DEMO_FILES = ("orders.parquet", "customers.parquet", "plan.json")


# ---------------------------------------------------------------- output


class Out:
    """Where the command writes: rich on a terminal, plain aligned text in a pipe."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(highlight=False, soft_wrap=False)
        self.rich = self.console.is_terminal

    def line(self, text: str = "", style: str | None = None) -> None:
        if self.rich:
            self.console.print(text, style=style, markup=False)
        else:
            sys.stdout.write(text + "\n")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]], *, title: str | None = None,
              right: Sequence[bool] | None = None) -> None:
        right = list(right or [False] * len(headers))
        if self.rich:
            from rich.table import Table
            from rich.text import Text

            # cells are Text, never markup: data such as "[red]" prints as written
            t = Table(title=title, title_justify="left", title_style="bold")
            for h, r in zip(headers, right):
                t.add_column(Text(h), justify="right" if r else "left", overflow="fold")
            for row in rows:
                t.add_row(*(Text(c) for c in row))
            self.console.print(t)
            return
        if title:
            sys.stdout.write(title + "\n")
        sys.stdout.write(plain_table(headers, rows, right) + "\n")

    def status(self, message: str):
        """A spinner on a terminal; nothing in a pipe."""
        if self.rich:
            return self.console.status(message)
        return contextlib.nullcontext()


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    last = len(headers) - 1

    def fmt(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if r else (c if i == last else c.ljust(w))
                 for i, (c, w, r) in enumerate(zip(cells, widths, right))]
        return "  ".join(parts).rstrip()

    lines = [fmt(headers), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def cell(v: Any) -> str:
    """One value as table text: null for None, ISO dates, floats to about 10 significant digits; text holding
    a character that is not printable (a terminal escape, a newline) as its repr (errors.shown)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if not math.isfinite(v) else f"{v:.10g}"
    if isinstance(v, (_dt.date, _dt.datetime)):
        return v.isoformat()
    return shown(str(v))


def _is_numeric(t) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def show_table(out: Out, table, head: int, *, title: str | None = None) -> None:
    """The first `head` rows of an Arrow table (all when head is 0), then the row count."""
    top = table if head <= 0 else table.slice(0, head)
    if out.rich:  # eidos dtypes under the names; a type eidos does not know shows as Arrow's
        try:
            types = [str(t) for t in ei.Schema.from_arrow(table.schema).dtypes]
        except EidosError:
            types = [str(f.type) for f in table.schema]
        headers = [f"{shown(f.name)}\n{t}" for f, t in zip(table.schema, types)]
    else:
        headers = [shown(name) for name in table.schema.names]
    rows = [[cell(v) for v in row.values()] for row in top.to_pylist()]
    out.table(headers, rows, title=title, right=[_is_numeric(f.type) for f in table.schema])
    n = table.num_rows
    note = f"{n:,} row{'s' if n != 1 else ''} x {table.num_columns} column{'s' if table.num_columns != 1 else ''}"
    if top.num_rows < n:
        note += f" (showing the first {top.num_rows:,}; --head 0 shows all)"
    out.line(note, style="dim")


def show_explain(out: Out, text: str) -> None:
    if not out.rich:
        out.line(text)
        return
    from rich.text import Text

    t = Text(text)
    t.highlight_regex(r"^lane: \S+", "bold green")
    t.highlight_regex(r"^(rejected|plan):", "bold")
    t.highlight_regex(r"^note:.*$", "yellow")
    t.highlight_regex(r"\(rule \d+[^)]*", "cyan")
    out.console.print(t)


# ---------------------------------------------------------------- inputs


def load_plan(path: str, trusted: Sequence[str] = (), urls: Sequence[str] = ()) -> ei.Flow:
    """A Flow from a plan JSON file ('-' reads standard input); errors name the file. A function the
    plan names must be registered or defined in a `trusted` module (--trust)."""
    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except FileNotFoundError:
        raise CommandError(f"plan file {name!r} does not exist") from None
    except IsADirectoryError:
        raise CommandError(f"plan file {name!r} is a folder, not a file") from None
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise CommandError(f"cannot read plan file {name!r}: {reason}") from None
    if not text.strip():
        raise CommandError(f"plan file {name!r} is empty; write one with flow.to_json()")
    try:
        return ei.Flow.from_json(text, trusted_modules=trusted, allowed_urls=tuple(urls))
    except EidosError as e:
        raise CommandError(f"plan file {name!r}: {e}") from e


def output_format(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    try:
        return FORMATS[ext]
    except KeyError:
        raise CommandError(f"cannot tell the output format of {path!r} from its extension "
                           f"{ext or '(none)'!r}; use a name ending in .parquet or .csv") from None


# ---------------------------------------------------------------- commands


def cmd_devices(args: argparse.Namespace, out: Out) -> int:
    d = ei.detect_devices()
    if args.json:
        out.line(json.dumps(asdict(d), indent=2))
        return 0
    flags = [f for f, on in (("avx2", d.has_avx2), ("avx512", d.has_avx512), ("neon", d.has_neon)) if on]
    gpus = ", ".join(f"{n} ({m / 2**30:.0f} GiB)" for n, m in zip(d.gpu_names, d.gpu_memory_bytes))
    rows = [
        ("platform", d.platform_system),
        ("cpu cores", str(d.cpu_cores)),
        ("cpu flags", ", ".join(flags) or "none detected"),
        ("memory limit", f"{d.memory_limit_bytes / 2**30:.1f} GiB"),
        ("gpus", f"{d.gpu_count}" + (f": {gpus}" if gpus else "")),
        ("EIDOS_BACKEND", d.forced_backend or "not set"),
        ("EIDOS_MEMORY_BUDGET", os.environ.get("EIDOS_MEMORY_BUDGET") or "not set (half the memory limit)"),
        ("EIDOS_TRITON_COST", os.environ.get("EIDOS_TRITON_COST") or "not set (the GPU cost model's constants)"),
    ]
    out.table(["device", "value"], rows)
    return 0


def cmd_backends(args: argparse.Namespace, out: Out) -> int:
    if args.matrix:
        return show_matrix(args, out)
    if args.targets:
        from eidos.isa import registry

        targets = registry.targets()
        if args.json:
            out.line(json.dumps([asdict(t) for t in targets], indent=2))
        else:
            out.table(["target", "source", "available", "reason"],
                      [(t.name, t.source, "yes" if t.available else "no", t.reason) for t in targets])
        return 0
    lanes = ei.backends()
    if args.json:
        out.line(json.dumps([{"lane": l.name, "kind": l.kind, "available": l.available, "reason": l.reason}
                             for l in lanes], indent=2))
        return 0
    rows = [(l.name, l.kind, "yes" if l.available else "no", l.reason or "") for l in lanes]
    out.table(["lane", "kind", "available", "reason"], rows)
    return 0


def show_matrix(args: argparse.Namespace, out: Out) -> int:
    """The kernel targets' speed matrix: the one saved on this machine, or a quick one measured now."""
    from eidos.isa import matrix

    if args.measure:
        with out.status("timing every kernel target (about a minute)") as status:
            result = matrix.measure(matrix.QUICK_SIZES, 3, command="eidos backends --matrix --measure",
                                    progress=getattr(status, "update", None))
        path = matrix.save(result)
    else:
        path = matrix.default_path()
        try:
            result = matrix.load(path)
        except ValueError as e:
            raise CommandError(f"the speed matrix {str(path)!r} is not valid JSON ({e}); "
                               "'eidos backends --matrix --measure' measures it again") from e
        if result is None:
            raise CommandError(f"no speed matrix has been measured on this machine (none at {path}); "
                               "'eidos backends --matrix --measure' times every kernel target now (1e3 and 1e5 "
                               "elements), 'python bench/matrix.py' in a source checkout at full size")
    if args.json:
        out.line(json.dumps(result, indent=2))
        return 0
    headers, rows = matrix.table(result)
    out.table(headers, rows, right=[False, True] + [True] * (len(headers) - 2))
    for line in [*matrix.provenance(result), f"from {path}"]:
        out.line(line, style="dim")
    return 0


def cmd_explain(args: argparse.Namespace, out: Out) -> int:
    flow = load_plan(args.plan, args.trust, args.allow_url)
    show_explain(out, flow.explain(engine=args.engine))
    return 0


def cmd_run(args: argparse.Namespace, out: Out) -> int:
    flow = load_plan(args.plan, args.trust, args.allow_url)
    if args.output:
        fmt = output_format(args.output)
        with out.status(f"running {args.plan} and writing {args.output}"):
            start = time.perf_counter()
            getattr(flow, f"write_{fmt}")(args.output, engine=args.engine)
            seconds = time.perf_counter() - start
        what = fmt
        if fmt == "parquet":
            import pyarrow.parquet as pq

            rows = pq.read_metadata(args.output).num_rows
            what += f", {rows:,} row{'s' if rows != 1 else ''}"
        out.line(f"wrote {args.output} ({what}) {_ran_on()}in {seconds:.3f} s")
        return 0
    with out.status(f"running {args.plan}"):
        start = time.perf_counter()
        table = flow.run(engine=args.engine, strict=args.strict)
        seconds = time.perf_counter() - start
    show_table(out, table, args.head)
    out.line(f"{_ran_on()}in {seconds:.3f} s", style="dim")
    return 0


def cmd_query(args: argparse.Namespace, out: Out) -> int:
    text = sys.stdin.read() if args.sql == "-" else args.sql
    flow = ei.sql(text, dialect=args.dialect, files=True)
    if args.explain:
        show_explain(out, flow.explain(engine=args.engine))
        return 0
    if args.output:
        getattr(flow, f"write_{output_format(args.output)}")(args.output, engine=args.engine)
        out.line(f"wrote {args.output} {_ran_on()}".rstrip())
        return 0
    table = flow.run(engine=args.engine)
    if args.format == "csv":
        import pyarrow.csv as pcsv

        sink = io.BytesIO()
        pcsv.write_csv(table, sink)
        sys.stdout.write(sink.getvalue().decode())
    elif args.format == "json":  # one object a line; decimals, dates and times as text
        for row in table.to_pylist():
            sys.stdout.write(json.dumps(row, default=str, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        show_table(out, table, args.head)
    return 0


def _ran_on() -> str:
    record = ei.last_run()
    return f"on lane {record.lane} " if record is not None and record.lane else ""


# ---------------------------------------------------------------- demo


def demo_data(folder: str, orders: int, seed: int) -> tuple[str, str]:
    """Two small parquet files, orders and customers, with nulls, decimals, dates and strings; each written
    atomically, as the sinks write (a complete file or none, a file of the same name untouched)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n_customers = max(10, orders // 10)
    regions = np.array(["north", "south", "east", "west", "zürich"])
    segments = np.array(["retail", "wholesale", "online"])
    customers = pa.table({
        "customer_id": pa.array(np.arange(1, n_customers + 1), pa.int64()),
        "name": pa.array([f"customer {i:04d}" for i in range(1, n_customers + 1)], pa.string()),
        "region": pa.array(rng.choice(regions, n_customers), pa.string(), mask=rng.random(n_customers) < 0.05),
        "segment": pa.array(rng.choice(segments, n_customers), pa.string()),
    })
    cents = rng.integers(100, 500_000, orders)
    statuses = np.array(["shipped", "pending", "returned", "cancelled"])
    start = _dt.date(2023, 1, 1)
    days = rng.integers(0, 730, orders)
    orders_t = pa.table({
        "order_id": pa.array(np.arange(1, orders + 1), pa.int64()),
        # ids past the last customer find no match in the join
        "customer_id": pa.array(rng.integers(1, n_customers + n_customers // 10 + 1, orders), pa.int64(),
                                mask=rng.random(orders) < 0.02),
        "amount": pa.array([decimal.Decimal(int(c)).scaleb(-2) for c in cents], pa.decimal128(10, 2),
                           mask=rng.random(orders) < 0.03),
        "order_date": pa.array([start + _dt.timedelta(days=int(d)) for d in days], pa.date32()),
        "status": pa.array(rng.choice(statuses, orders), pa.string(), mask=rng.random(orders) < 0.02),
    })
    orders_path = os.path.join(folder, "orders.parquet")
    customers_path = os.path.join(folder, "customers.parquet")
    for table, path in ((orders_t, orders_path), (customers, customers_path)):
        with atomic(path, "parquet") as tmp:
            pq.write_table(table, tmp)
    return orders_path, customers_path


def demo_flow(orders_path: str, customers_path: str) -> ei.Flow:
    """Revenue per region in 2024 from orders not cancelled: filter, join, group_by/agg, sort."""
    col = ei.col
    orders = ei.read_parquet(orders_path)
    customers = ei.read_parquet(customers_path)
    return (orders
            .filter((col("status") != "cancelled") & (col("order_date") >= ei.date(2024, 1, 1)))
            .join(customers, on="customer_id")
            .group_by("region")
            .agg(orders=ei.count(),
                 customers=col("customer_id").n_unique(),
                 revenue=col("amount").sum(),
                 largest=col("amount").max(),
                 first_order=col("order_date").min())
            .sort("revenue", descending=True))


def tables_agree(result, expected) -> str | None:
    """None when a lane's result matches the reference's under eidos semantics (the demo's flow is
    sorted, so row order counts), else the difference as eidos.testing.compare reports it."""
    from eidos.testing.compare import assert_tables_equal

    try:
        assert_tables_equal(result, expected, ordered=True)
    except AssertionError as e:
        return str(e).strip() or "results differ"
    return None


def cmd_demo(args: argparse.Namespace, out: Out) -> int:
    if args.dir:
        demo_folder(args.dir, args.force)
        folder_cm = contextlib.nullcontext(args.dir)
    else:
        folder_cm = tempfile.TemporaryDirectory(prefix="eidos-demo-")
    with folder_cm as folder:
        with out.status("making the demo data"):
            orders_path, customers_path = demo_data(folder, args.rows, args.seed)
            flow = demo_flow(orders_path, customers_path)
        if args.dir:
            with atomic(os.path.join(folder, "plan.json"), "json") as tmp, open(tmp, "w", encoding="utf-8") as f:
                f.write(flow.to_json())
        out.line(f"eidos demo: {args.rows:,} orders joined with their customers, revenue per region in 2024",
                 style="bold")
        out.line(f"data: {orders_path}, {customers_path}"
                 + (f"; plan: {os.path.join(folder, 'plan.json')}" if args.dir else " (removed afterwards)"))
        return _demo_lanes(out, flow, folder)


def demo_folder(folder: str, force: bool) -> None:
    """The --dir folder, made if missing; files of the user's that the demo would replace stop it unless --force."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise CommandError(f"--dir {folder!r} is a file, not a folder; name a folder (it is made if missing)")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise CommandError(f"cannot make the folder {folder!r}: {e.strerror}") from e
    there = [name for name in DEMO_FILES if os.path.lexists(os.path.join(folder, name))]
    if there and not force:
        raise CommandError(f"{folder!r} already holds {', '.join(there)}, which the demo would replace; "
                           "name another folder, or pass --force to replace them")
    for name in there:
        if os.path.isdir(os.path.join(folder, name)):
            raise CommandError(f"{os.path.join(folder, name)!r} is a folder; the demo writes a file there")


def _demo_lanes(out: Out, flow: ei.Flow, folder: str) -> int:
    lanes = ei.backends()
    available = [l for l in lanes if l.available]
    chosen, verdicts = _planner_view(out, flow)
    prefix = os.path.join(folder, "")
    verdicts = {name: why.replace(prefix, "") for name, why in verdicts.items()}  # paths as in the data line
    results: dict[str, Any] = {}
    rows, problems, diffs = [], 0, []
    order = sorted(available, key=lambda l: l.kind != "reference")  # the reference first: the others compare to it
    for lane in order:
        with out.status(f"running on {lane.name}"):
            try:
                results[lane.name], seconds = _best_of_two(flow, lane.name)
                outcome = None
            except UnsupportedError as e:
                outcome = "cannot run it"
                verdicts.setdefault(lane.name, _first_line(e))
            except EidosError as e:
                outcome = f"failed: {_first_line(e)}"
                problems += 1
        if outcome is not None:
            rows.append((lane.name, lane.kind, verdicts.get(lane.name, ""), "", "", outcome))
            continue
        table = results[lane.name]
        if lane.kind == "reference":
            agree = "is the reference"
        elif "reference" not in results:
            agree = "no reference result to compare"
        else:
            diff = tables_agree(table, results["reference"])
            agree = "yes" if diff is None else "NO (see below)"
            if diff is not None:
                problems += 1
                diffs.append(f"{lane.name} vs reference: {diff}")
        rows.append((lane.name, lane.kind, verdicts.get(lane.name, ""), f"{seconds:.3f} s", f"{table.num_rows:,}",
                     agree))
    out.line()
    out.table(["lane", "kind", "planner", "time", "rows", "agrees with reference"], rows,
              title="every available lane, forced with engine=<lane>",
              right=[False, False, False, True, True, False])
    missing = [l for l in lanes if not l.available]
    if missing:
        out.line()
        out.table(["lane", "kind", "why unavailable"], [(l.name, l.kind, l.reason) for l in missing],
                  title="unavailable lanes")
    shown = chosen if chosen in results else next(iter(results), None)
    if shown is not None:
        out.line()
        show_table(out, results[shown], 20, title=f"result (lane {shown})")
    for diff in diffs:
        out.line()
        out.line(diff)
    if problems:
        out.line()
        out.line(f"{problems} lane{'s' if problems != 1 else ''} failed or disagreed with the reference",
                 style="bold red")
        return 1
    return 0


def _best_of_two(flow: ei.Flow, lane: str):
    """The result on `lane` and the faster of two runs (the first also loads the engine)."""
    times = []
    for _ in range(2):
        start = time.perf_counter()
        table = flow.run(engine=lane, strict=True)
        times.append(time.perf_counter() - start)
    return table, min(times)


def _planner_view(out: Out, flow: ei.Flow) -> tuple[str | None, dict[str, str]]:
    """Run once with no engine named: the lane eidos chooses, and per lane why it was chosen or not."""
    try:
        with out.status("running with the lane eidos chooses"):
            flow.run()
    except EidosError as e:
        out.line(f"left to itself, eidos fails: {_first_line(e)}", style="red")
        return None, {}
    record = ei.last_run()
    decision = record.decision
    out.line(f"left to itself, eidos chooses {record.lane} by rule {decision.rule}: {decision.reason}")
    verdicts = {name: why for name, why in decision.rejected}
    verdicts[decision.lane_name] = f"chosen by rule {decision.rule}"
    if record.lane != decision.lane_name:
        verdicts[record.lane] = f"took over from {decision.lane_name}"
    return record.lane, verdicts


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# ---------------------------------------------------------------- parser


def cmd_cache(args: argparse.Namespace, out: Out) -> int:
    """The compiled-kernel cache: where it is and its size (info), emptied (clear), or its ahead-of-time kernels
    built now (warm) rather than in the background on first use."""
    from eidos.isa import cache

    if args.action == "clear":
        freed = cache.clear()
        out.line(f"removed {freed / 2**20:.1f} MiB of compiled kernels from {cache.cache_root()}")
        return 0
    if args.action == "warm":
        from eidos.isa.backends.cpu import native

        names = native.build_all()
        out.line(f"built {len(names)} ahead-of-time kernel tables in {native.directory()}")
        return 0
    u = cache.usage()
    if args.json:
        out.line(json.dumps({**u, "limit_bytes": cache.max_bytes(), "build": cache.build_versions(),
                             "build_tag": cache.build_tag()}, indent=2))
        return 0
    rows = [("folder", u["root"] + ("  ($EIDOS_CACHE_DIR)" if os.environ.get("EIDOS_CACHE_DIR") else "")),
            ("size", f"{u['bytes'] / 2**20:.1f} MiB in {u['files']} files (limit {cache.max_bytes() >> 20} MiB, "
                     "EIDOS_CACHE_MAX_MB)"),
            *((f"  {t}", f"{n / 2**20:.1f} MiB") for t, n in u["targets"].items()),
            ("this build", f"{cache.build_tag()} ({', '.join(f'{k} {v}' for k, v in cache.build_versions().items())})")]
    native = Path(u["root"]) / "isa-cpu" / cache.build_tag() / "native"
    error = native / "build-error.txt"
    rows.append(("ahead-of-time kernels", f"{len(list(native.glob('*.json')))} tables built"
                 + (f"; the build failed: {error.read_text()}" if error.exists() else "")))
    out.table(["kernel cache", "value"], rows)
    return 0


def cmd_calibrate(args: argparse.Namespace, out: Out) -> int:
    """Measure the lanes' cost constants here and store them (or, with --show, print those in use and whence)."""
    if not args.show:
        with out.status("measuring the lanes' cost constants (under a minute)") as status:
            result = ei.calibrate(progress=status.update if status is not None else None)
    used = ei.cost_constants()
    if args.json:
        out.line(json.dumps({lane: {"source": c.source, "values": dict(c.values)} for lane, c in used.items()}
                            if args.show else {**result, "machine": asdict(result["machine"])}, indent=2))
        return 0
    if args.show:
        for lane, c in used.items():
            out.table(["constant", "value"], [(k, f"{v:.3g}") for k, v in c.values.items()], title=f"{lane}: {c.source}",
                      right=[False, True])
        return 0
    machine = result["machine"]
    rows = [(lane, k, f"{result['defaults'][lane][k]:.3g}", f"{result['scaled'][lane][k]:.3g}", f"{v:.3g}")
            for lane, values in result["lanes"].items() for k, v in values.items()]
    out.table(["lane", "constant", "default", "default scaled here", "measured here"], rows,
              right=[False, False, True, True, True],
              title=f"measured in {result['seconds']:.1f} s on {machine} ({machine.bandwidth / 1e9:.1f} GB/s copy); "
                    f"written to {result['path']}")
    for lane, why in result["skipped"].items():
        out.line(f"skipped {lane}: {why}")
    return 0


def _cache_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=("info", "clear", "warm"), default="info",
                   help="info (default): where and how big; clear: remove every compiled kernel; warm: build the "
                        "ahead-of-time kernels now")
    _json_flag(p)


def _calibrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--show", action="store_true", help="print the constants in use and where they came from; measure nothing")
    _json_flag(p)


def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _backends_args(p: argparse.ArgumentParser) -> None:
    _json_flag(p)
    p.add_argument("--targets", action="store_true",
                   help="list the kernel targets (the 'eidos.isa.backends' entry points) instead of the lanes")
    p.add_argument("--matrix", action="store_true",
                   help="the kernel targets' measured speed per operation kind and size (the latest measured here)")
    p.add_argument("--measure", action="store_true", help="with --matrix: measure it now (quick sizes) and save it")


def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", metavar="PLAN.json", help="a plan written by Flow.to_json() ('-' reads stdin)")
    p.add_argument("--engine", metavar="LANE", help="force this lane (see 'eidos backends')")
    p.add_argument("--trust", action="append", default=[], metavar="MODULE",
                   help="let the plan call functions defined in MODULE and its submodules (repeatable); "
                        "without it the plan may call no Python function (a plan may come from anyone)")
    p.add_argument("--allow-url", action="append", default=[], metavar="PREFIX",
                   help="let the plan read http(s) URLs below PREFIX (repeatable); without it the plan reads "
                        "no URL (it could reach any host: docs/security.md)")


def _run_args(p: argparse.ArgumentParser) -> None:
    _plan_args(p)
    p.add_argument("-o", "--output", metavar="FILE", help="write the result to FILE (.parquet or .csv)")
    p.add_argument("-n", "--head", type=int, default=HEAD_DEFAULT, metavar="N",
                   help=f"rows to print (default {HEAD_DEFAULT}; 0 prints all)")
    p.add_argument("--strict", action="store_true",
                   help="fail instead of handing over to another lane when the chosen one cannot run it")


def _query_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("sql", metavar="SQL", help="the query ('-' reads stdin); FROM 'data/*.parquet' or 'x.csv' "
                                              "reads files")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="table (default: the first rows and the count), csv (every row, with a header) or json "
                        "(every row, one object a line)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the result to FILE (.parquet or .csv)")
    p.add_argument("-n", "--head", type=int, default=HEAD_DEFAULT, metavar="N",
                   help=f"rows to print as a table (default {HEAD_DEFAULT}; 0 prints all)")
    p.add_argument("--engine", metavar="LANE", help="force this lane (see 'eidos backends')")
    p.add_argument("--explain", action="store_true", help="show the plan, the lane and why; run nothing")
    p.add_argument("--dialect", default="duckdb", help="the SQL dialect, as sqlglot names it (default duckdb)")


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=5000, metavar="N", help="orders to make (default 5000)")
    p.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    p.add_argument("--dir", metavar="DIR",
                   help="keep the data and the plan (plan.json) in DIR instead of a temporary folder; "
                        f"files named {', '.join(DEMO_FILES)} already there stop the demo unless --force")
    p.add_argument("--force", action="store_true",
                   help=f"with --dir: replace {', '.join(DEMO_FILES)} when DIR already holds them")


def cmd_serve(args: argparse.Namespace, out: Out) -> int:
    """Run an execution service in the foreground until interrupted (Ctrl-C or SIGTERM)."""
    import signal

    from eidos.remote.auth import Tls, read_token
    from eidos.remote.service import Config, ExecutionService

    if (args.tls_cert is None) != (args.tls_key is None):
        raise PlanError("--tls-cert and --tls-key go together")
    config = Config(token=read_token(args.token_file), host=args.host, port=args.port, data_port=args.data_port,
                    tls=Tls(Path(args.tls_cert), Path(args.tls_key)) if args.tls_cert else None,
                    pool_bytes=args.pool_mb << 20,
                    session_bytes=args.session_mb << 20 if args.session_mb is not None else None,
                    trusted_modules=tuple(args.trust_module), allowed_paths=tuple(args.allow_path),
                    allowed_databases=tuple(args.allow_database))
    service = ExecutionService(config)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=service.shutdown, daemon=True).start())
    scheme = "eidos+tls" if config.tls else "eidos"
    out.line(f"eidos service at {scheme}://{config.host}:{service.port} (data channel port {service.channel.port}, "
             f"pool {config.pool_bytes >> 20} MiB{', pinned' if service.pool.pinned else ''}, "
             f"kernel targets: {', '.join(config.isa_targets)})")
    sys.stdout.flush()
    try:
        service.serve()
    except KeyboardInterrupt:
        pass
    finally:
        service.shutdown()
    return 0


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0: all)")
    p.add_argument("--port", type=int, default=8815, help="control-plane port (default 8815; 0: any free)")
    p.add_argument("--data-port", type=int, default=0, help="data-channel port (default: any free; clients learn it)")
    p.add_argument("--token-file", required=True, metavar="FILE",
                   help="file holding the token every client must present (mode 600)")
    p.add_argument("--tls-cert", metavar="PEM", help="serve both planes over TLS with this certificate")
    p.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    p.add_argument("--pool-mb", type=int, default=1024, metavar="MIB",
                   help="pre-allocated memory for incoming buffers (default 1024; pinned when CUDA is present)")
    p.add_argument("--session-mb", type=int, metavar="MIB", help="one client's limit (default: the whole pool)")
    p.add_argument("--trust-module", action="append", default=[], metavar="MODULE",
                   help="a module whose functions remote plans may call (repeatable); registered UDFs need none")
    p.add_argument("--allow-path", action="append", default=[], metavar="DIR",
                   help="a folder remote plans may read files from (repeatable; default: none)")
    p.add_argument("--allow-database", action="append", default=[], metavar="URI",
                   help="a database remote plans may read (repeatable; default: none)")


# name: (function, arguments, one-line help, description)
COMMANDS = {
    "devices": (cmd_devices, _json_flag, "what this machine has: cores, memory, CPU flags, GPUs",
                "Show what eidos detected on this machine: CPU cores and flags, the memory limit "
                "(cgroup-aware), GPUs, and the EIDOS_* settings."),
    "backends": (cmd_backends, _backends_args, "every lane, its kind, and whether it can run here",
                 "List every lane (built-in and from the 'eidos.backends' entry points) with its kind, "
                 "whether it is available here, and if not, why and how to install what it needs. --targets "
                 "lists the kernel targets the same way; --matrix shows their measured speed per operation "
                 "kind and size (saved by 'python bench/matrix.py' or --measure), saying when and where it "
                 "was measured."),
    "explain": (cmd_explain, _plan_args, "show the optimized plan, the lane chosen and why",
                "Show the optimized plan of PLAN.json, the lane eidos chooses, the rule that chose it, "
                "and every rejected lane with why. Runs nothing."),
    "run": (cmd_run, _run_args, "run a plan; print the result or write it to a file",
            "Run PLAN.json on the lane eidos chooses (or --engine). Without -o, print the first rows of "
            "the result and the row count; with -o, write the whole result atomically as parquet or CSV, "
            "chosen by extension."),
    "query": (cmd_query, _query_args, "run a SQL query over parquet and CSV files",
              "Run a SQL query (DuckDB's dialect by default) with eidos's semantics on the lane eidos chooses (or "
              "--engine): tables in FROM are quoted file paths or globs, FROM 'data/*.parquet' or 'x.csv'. "
              "Prints the first rows and the row count, or every row as --format csv / json, or writes -o FILE."),
    "demo": (cmd_demo, _demo_args, "make a small dataset and run one flow on every available lane",
             "Make a small orders/customers dataset (nulls, decimals, dates, strings) as parquet, build "
             "one flow (filter, join, group_by/agg, sort), and run it on every available lane: each "
             "lane's planner verdict, time (best of two runs), and whether its result agrees with the "
             "reference lane's. Exits 1 when a lane fails or disagrees."),
    "cache": (cmd_cache, _cache_args, "the compiled-kernel cache: where, how big; clear it; warm it",
              "Show the compiled-kernel cache ($EIDOS_CACHE_DIR, else $XDG_CACHE_HOME/eidos, else ~/.cache/eidos): its "
              "size against its limit (EIDOS_CACHE_MAX_MB, default 1024) and the build it is for (library versions, "
              "CPU). 'clear' removes every compiled kernel; 'warm' builds the ahead-of-time element-wise kernels now "
              "(otherwise built in the background the first time a process needs them)."),
    "calibrate": (cmd_calibrate, _calibrate_args, "measure the lanes' cost constants on this machine",
                  "Time small probes on every lane with a cost model available here (under a minute) and store the "
                  "constants they give in costs.json in the cache folder ($EIDOS_CACHE_DIR, else "
                  "$XDG_CACHE_HOME/eidos, else ~/.cache/eidos); the planner uses them from the next plan on. "
                  "Without it, each lane's defaults are scaled by this machine's cores. --show prints the "
                  "constants in use and where they came from."),
    "serve": (cmd_serve, _serve_args, "run an execution service for remote clients (ei.connect)",
              "Serve remote clients: they connect with ei.connect('eidos://HOST:PORT', token=...) and run plans "
              "(engine='remote'), tensors (device 'remote:gpu') and ISA programs here. Every call needs the "
              "token in --token-file; remote plans call only registered UDFs and --trust-module functions and "
              "read only --allow-path folders and --allow-database databases."),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eidos",
        description="Run one lazy relational plan (a Flow) on the engine that suits it.",
        epilog="Plans are the JSON written by Flow.to_json(). 'eidos COMMAND --help' tells more.")
    parser.add_argument("--version", action="version", version=f"eidos {ei.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (func, add_args, help_, description) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=description)
        add_args(p)
        p.set_defaults(func=func)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if getattr(args, "rows", 1) < 1:
        parser.error("--rows must be at least 1")
    if getattr(args, "measure", False) and not args.matrix:
        parser.error("--measure goes with --matrix")
    if getattr(args, "force", False) and not args.dir:
        parser.error("--force goes with --dir")
    try:
        rc = args.func(args, Out())
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return rc
    except EidosError as e:
        return _error(str(e))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (e.g. `eidos run plan.json | head`): not an error
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as e:
        # the system refused something (a path, a permission, a full disk): its words, no traceback
        return _error(os_message(e))
    # Any other exception is a bug in eidos: it propagates, traceback and all.


def _error(message: str) -> int:
    """`error: <message>` on stderr and status 1; with EIDOS_DEBUG=1 the traceback first."""
    if os.environ.get("EIDOS_DEBUG", "") not in ("", "0"):
        traceback.print_exc()
    print(f"error: {message}", file=sys.stderr)
    return 1


def os_message(e: OSError) -> str:
    """What an OSError says, with the paths it names: 'Permission denied: '/x/y''."""
    if not e.strerror:
        return str(e) or type(e).__name__
    names = [repr(n) for n in (e.filename, e.filename2) if n is not None]
    return e.strerror + (f": {' -> '.join(names)}" if names else "")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
