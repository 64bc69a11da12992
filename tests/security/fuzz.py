"""Mutations of real JSON documents, for fuzzing the loaders of plans and ISA programs.

A mutation picks a place in a document (a key of an object, an item of a list) and replaces its
value (with a hostile value, a random JSON value, or another part of the document), deletes it,
adds an unknown key next to it, or duplicates a list item; a few mutations are stacked. Documents
are also cut short and nested absurdly deep.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from eidos.testing.strategies import profile

# Derandomized like the 'ci' profile (the same examples every run), with more of them as each example
# is quick ($EIDOS_HYPOTHESIS_PROFILE=thorough searches afresh, longer). A deadline flags an input that
# makes a loader slow.
FUZZ = settings(profile(), max_examples=max(150, profile().max_examples), deadline=timedelta(seconds=10),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])

# Modules a document may name that must never be imported: one with a side effect at import,
# ones that do something when imported (open a browser, print).
FORBIDDEN_MODULES = {"tests.data.import_marker", "antigravity", "this", "webbrowser", "turtle", "idlelib"}

HOSTILE = [
    None, True, False, 0, -1, 1, 7, 2**31, 2**53 + 1, 2**63, 2**64, -(2**63) - 1, 2**10000, -(2**10000), 10**5000,
    1e400, -1e400, float("nan"), -0.0, 0.5, 1e-320, 1e308,
    "", " ", "x", "a" * 5000, "\x00", "é", "😀", "0", "-1", "1e400", "NaN", "null", "true",
    "os:system", "builtins:exec", "builtins:eval", "subprocess:run", "tests.data.import_marker:shout",
    "antigravity:fly", "this:s", "webbrowser:open", "os.path:join", "os:path.join", "__import__", ":", "a:",
    ":b", "eidos.testing.strategies:udf_sign", "eidos.testing.strategies:__builtins__.exec",
    "../../etc/passwd", "/etc/passwd", "out.parquet", "sqlite:///fuzz.db", "duckdb:///fuzz.duckdb",
    "postgresql://user:secret@127.0.0.1:1/db",
    [], {}, [[]], [None], [[], []], [1, 2, 3], {"": None},
    {"int": "123"}, {"int": "1" * 5000}, {"int": "x"}, {"int": 5}, {"float": "nan"}, {"float": "inf"},
    {"float": "bogus"}, {"decimal": "NaN"}, {"decimal": "1e999999999"}, {"decimal": "1.5"}, {"date": "2024-02-30"},
    {"date": "2024-02-29"}, {"timestamp": "2024-01-01T00:00:00+05:00"}, {"timestamp": "x"}, {"tuple": [1, "a", None]},
    {"tuple": 5}, {"tuple": [[]]}, {"int": "1", "float": "2"},
]


def vocabulary(seeds: list) -> list:
    """Every scalar the seed documents hold: names, kinds, numbers, in the places they fit elsewhere."""
    seen: dict = {}
    for doc in seeds:
        for parent, key in places(doc):
            v = parent[key]
            if not isinstance(v, (dict, list)) and not (isinstance(v, str) and len(v) > 100):
                seen.setdefault((type(v), v), v)
    return list(seen.values())


def json_values(leaves: list, words: list) -> st.SearchStrategy:
    """Hostile values, the seeds' own words and subtrees, and small random JSON values."""
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                        st.text(max_size=6))
    tree = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                        max_leaves=6)
    return st.one_of(st.sampled_from(HOSTILE), st.sampled_from(words), st.sampled_from(leaves), tree)


def places(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) in `doc`: object keys and list indices, without recursion."""
    out, stack = [], [doc]
    while stack:
        v = stack.pop()
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, x in items:
            out.append((v, k))
            stack.append(x)
    return out


@st.composite
def mutated(draw, seeds: list, leaves: list, words: list, body: str) -> Any:
    """A seed document with one to three mutations, mostly inside its `body` (the top-level keys are
    few and a document without them is refused at once)."""
    doc = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        inside = draw(st.integers(0, 9)) > 0 and isinstance(doc, dict) and isinstance(doc.get(body), (dict, list))
        spots = places(doc[body]) if inside else places(doc)
        if not spots:
            break
        parent, key = draw(st.sampled_from(spots))
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "swap", "extra", "dup"]))
        if op == "replace":
            parent[key] = copy.deepcopy(draw(json_values(leaves, words)))
        elif op == "delete":
            del parent[key]
        elif op == "swap":
            other, okey = draw(st.sampled_from(spots))
            parent[key] = copy.deepcopy(other[okey])
        elif op == "extra" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "node", "col", "lit", "op", "source", "float"]))] = copy.deepcopy(
                draw(json_values(leaves, words)))
        elif op == "dup" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
    return doc


def as_text(doc: Any) -> str | None:
    """The document as JSON text (NaN and infinities as Python writes them), or None when it holds an
    integer too long for JSON text that Python reads back."""
    try:
        return json.dumps(doc)
    except ValueError:
        return None


@st.composite
def truncated(draw, seeds: list) -> str:
    text = json.dumps(draw(st.sampled_from(seeds)))
    return text[: draw(st.integers(0, len(text) - 1))]


@st.composite
def deeply_nested(draw, seeds: list, key: str) -> str:
    """A real document whose value at `key` (or the whole document) is nested `depth` levels deep."""
    depth = draw(st.sampled_from([150, 201, 400, 999, 1001, 5000, 10_000, 100_000]))
    kind = draw(st.sampled_from(["list", "object", "mixed", "node"]))
    opening = {"list": "[", "object": '{"a": ', "mixed": '[{"b": ', "node": '{"node": "Distinct", "input": '}[kind]
    closing = {"list": "]", "object": "}", "mixed": "}]", "node": "}"}[kind]
    levels = depth if kind != "mixed" else depth // 2
    inner = opening * levels + "1" + closing * levels
    doc = json.dumps(draw(st.sampled_from(seeds)))
    if f'"{key}": ' not in doc or draw(st.booleans()):
        return inner
    return doc.replace(f'"{key}": ', f'"{key}": {inner}, "{key}-shadow": ', 1)


class Watch:
    """No side effects while fuzzing: nothing written in the working folder or the data folder, no
    forbidden module imported, no os.system or subprocess.run call."""

    def __init__(self, folders: list[Path]):
        self.folders = folders
        self.calls: list[str] = []

    def listing(self) -> list:
        return sorted((str(p), p.stat().st_size) for f in self.folders for p in f.rglob("*"))

    @contextlib.contextmanager
    def patched(self) -> Iterator[None]:
        real = os.system, subprocess.run
        os.system = lambda *a, **k: self.calls.append(f"os.system{a}")
        subprocess.run = lambda *a, **k: self.calls.append(f"subprocess.run{a}")
        try:
            yield
        finally:
            os.system, subprocess.run = real

    @contextlib.contextmanager
    def check(self) -> Iterator[None]:
        modules, files = set(sys.modules), self.listing()
        yield
        imported = (set(sys.modules) - modules) & FORBIDDEN_MODULES
        assert not imported, f"imported {imported}"
        assert self.listing() == files, "a file was written"
        assert not self.calls, self.calls
