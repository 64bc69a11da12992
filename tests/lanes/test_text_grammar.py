"""The one text grammar (eidos.ir.grammar) read alike on every lane: LIKE patterns and casts from
String on tricky inputs (escapes, % and _ as data, regex and GLOB metacharacters, unicode, the
empty pattern, odd spaces and digits), each lane against the reference lane."""

from __future__ import annotations

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col
from eidos.errors import ExecutionError, UnsupportedError
from eidos.testing.compare import values_equal
from tests.lanes.helpers import lane_or_skip

LANES = ["polars", "duckdb", "sqlite", "postgresql"]

TEXTS = ["", "a", "abc", "ABC", "a%c", "a_c", "a.c", "abbc", "a\\c", "a\\%c", "\\", "%", "_", "[x]!", "(a|b)*",
         "^$", "a+b", "aab", "a*c", "a?c", "]", "a\nb", "x\ny\n", "é", "e\u0301", "😀", "日本語", "Straße", "STRASSE",
         "{1}", "\\d", None]
PATTERNS = ["", "%", "%%", "_", "__", "a%", "%c", "a%%c", "a_c", "a\\%", "a\\_c", "a\\c", "\\", "\\%", "a.c", ".%",
            "[x]_", "(a|b)*", "^$", "a+b", "a*c", "a?c", "[a]%", "]", "%\n%", "a_b", "x\ny_", "日本%", "%ß%",
            "Stra_e", "A%", "{1}", "\\d", "$%", "_\u0301"]


def _stored(lane_name: str, load_into, table: pa.Table) -> ei.Flow:
    lane = lane_or_skip(lane_name)
    try:
        return load_into(lane, ei.from_arrow(table))
    except UnsupportedError as e:
        pytest.skip(f"the data cannot be stored where lane {lane_name!r} reads: {e}")


def _run(lane_name: str, flow: ei.Flow):
    gaps = lane_or_skip(lane_name).supports(flow.plan)
    if gaps:
        pytest.skip(f"lane {lane_name!r} lacks {', '.join(gaps)}")
    return flow.run(engine=lane_name, strict=True)


@pytest.mark.parametrize("lane_name", LANES)
def test_like_patterns_agree(lane_name, load_into):
    table = pa.table({"i": pa.array(range(len(TEXTS)), pa.int64()), "s": pa.array(TEXTS, pa.large_string())})

    def query(f: ei.Flow) -> ei.Flow:
        return f.sort("i").select(**{f"p{k}": col("s").str.like(p) for k, p in enumerate(PATTERNS)})

    got = _run(lane_name, query(_stored(lane_name, load_into, table))).to_pydict()
    want = query(ei.from_arrow(table)).run(engine="reference").to_pydict()
    wrong = [f"{p!r}: {[(t, g) for t, g, w in zip(TEXTS, got[f'p{k}'], want[f'p{k}']) if g != w]}"
             for k, p in enumerate(PATTERNS) if got[f"p{k}"] != want[f"p{k}"]]
    assert not wrong, f"lane {lane_name} reads these LIKE patterns otherwise (text, its answer):\n" + "\n".join(wrong)


CAST_TEXTS = ["12", " -7 ", "+3", "-0", "1.5", ".5", "5.", "1e3", "+1.5E-3", "1e", "+-1", "1_000", "١٢",
              "\u00a0 42\t", "\x1c7\u3000\x85", "\u200b1", "300", "-nan", "+iNf", " Infinity ", "infinit", "TRUE",
              "fAlse ", "yes", "2020-02-29", " 2024-01-31\n", "2021-02-30", "0000-01-01", "", None]
CAST_TYPES = [ei.Int64, ei.Int8, ei.UInt8, ei.Float64, ei.Float32, ei.Boolean, ei.Date, ei.Decimal(10, 2)]


@pytest.mark.parametrize("dtype", CAST_TYPES, ids=str)
@pytest.mark.parametrize("lane_name", LANES)
def test_casts_from_string_agree(lane_name, dtype, load_into):
    """Texts the reference reads come out the same; each text it rejects raises on the lane too."""
    table = pa.table({"i": pa.array(range(len(CAST_TEXTS)), pa.int64()),
                      "s": pa.array(CAST_TEXTS, pa.large_string())})
    here, there = ei.from_arrow(table), _stored(lane_name, load_into, table)

    def query(f: ei.Flow, rows: list[int]) -> ei.Flow:
        return f.filter(col("i").is_in(rows)).sort("i").select("i", v=col("s").cast(dtype))

    good, bad = [], []
    for i in range(len(CAST_TEXTS)):
        try:
            query(here, [i]).run(engine="reference")
            good.append(i)
        except ExecutionError:
            bad.append(i)
    assert good and bad, "the texts include some the reference reads and some it rejects"
    got = _run(lane_name, query(there, good)).to_pydict()
    want = query(here, good).run(engine="reference").to_pydict()
    assert got["i"] == want["i"]
    wrong = [(CAST_TEXTS[i], g, w) for i, g, w in zip(want["i"], got["v"], want["v"])
             if not values_equal(g, w, is_float=dtype.is_float, rel=0)]
    assert not wrong, f"lane {lane_name} casts these texts to {dtype} otherwise (text, its value, reference):\n{wrong}"
    accepted = []
    for i in bad:
        try:
            accepted.append((CAST_TEXTS[i], _run(lane_name, query(there, [i]))["v"][0].as_py()))
        except ExecutionError:
            pass
    assert not accepted, f"lane {lane_name} casts texts the reference rejects to {dtype} (text, its value): {accepted}"
