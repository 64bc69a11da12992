"""The examples in the public API's docstrings run, and print what they say."""

from __future__ import annotations

import datetime
import doctest
import importlib

import pytest

import eidos as ei
import eidos.selectors as cs

# The modules whose docstrings carry the plan layer's examples (tests/tensor/test_docs.py runs the
# tensor layer's); each example may use `ei`, `col`, `lit`, `when`, `count`, `date`, `udf` and
# `datetime` (and `cs`, eidos.selectors) without importing them, as the API pages say.
MODULES = [
    "eidos",
    "eidos.flow.expr",
    "eidos.flow.frame",
    "eidos.selectors",
    "eidos.flow.read",
    "eidos.flow.sql",
    "eidos.hal.registry",
    "eidos.hal.runner",
    "eidos.hal.devices",
    "eidos.hal.trust",
    "eidos.remote.client",
]
GLOBALS = {"ei": ei, "col": ei.col, "lit": ei.lit, "when": ei.when, "count": ei.count, "date": ei.date,
           "udf": ei.udf, "datetime": datetime, "cs": cs}
FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


@pytest.fixture(autouse=True)
def no_forced_lane(monkeypatch):
    """The examples show the lane eidos chooses, so no lane is forced from the environment."""
    monkeypatch.delenv("EIDOS_BACKEND", raising=False)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    tests = [t for t in finder.find(module, name, globs={}, extraglobs=GLOBALS) if t.examples]
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples in {name} failed (above)"


# API pages whose examples are doctests (written with >>>), run as the docstrings' are.
PAGES = ["docs/api/types.md", "docs/api/sources.md", "docs/api/expressions.md", "docs/api/hal.md"]


@pytest.mark.parametrize("page", PAGES)
def test_page_examples(page):
    import pathlib

    path = pathlib.Path(__file__).parent.parent / page
    result = doctest.testfile(str(path), module_relative=False, globs=dict(GLOBALS), optionflags=FLAGS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {page} failed (above)"


def test_every_name_of_the_plan_layer_has_an_example():
    """Each public method of Flow, GroupBy, Expr and its namespaces, each column selector, and each function
    `eidos` exports from the plan layer shows an example (run above), so the reference never lists a bare name."""
    import inspect

    from eidos.flow import expr

    namespaces = [c for c in vars(expr).values() if inspect.isclass(c) and c.__name__.endswith("Methods")]
    classes = [ei.Flow, ei.GroupBy, ei.Expr, expr.Then, *namespaces]   # namespaces: .str, .dt, .list, .bin, ...
    members = [(f"{c.__name__}.{n}", v) for c in classes for n, v in vars(c).items()
               if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))]
    members += [(f"ei.{n}", v) for n, v in vars(ei).items() if inspect.isfunction(v)
                and v.__module__.startswith(("eidos.flow", "eidos.selectors", "eidos.hal.runner"))]
    members += [(f"cs.{n}", v) for n, v in vars(cs).items() if inspect.isfunction(v)
                and v.__module__ == cs.__name__ and not n.startswith("_") and n != "expand"]
    missing = [name for name, v in members
               if ">>>" not in (inspect.getdoc(v.fget if isinstance(v, property) else v) or "")]
    assert not missing, f"public names without an example in their docstring: {', '.join(missing)}"
