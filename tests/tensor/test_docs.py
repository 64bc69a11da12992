"""The examples in eidos.tensor's docstrings run and print what they show (part of the normal pytest run)."""

import doctest
import inspect
import pathlib

import numpy as np
import pytest

import eidos as ei
from eidos.tensor import array, backend, ops, realization, shapes

MODULES = [array, ops, realization, shapes]
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module", [*MODULES, backend], ids=lambda m: m.__name__)
def test_docstring_examples(module, reference):
    """On the reference interpreter: the examples are tiny, and it compiles nothing."""
    with np.printoptions(precision=4, suppress=False, threshold=1000, linewidth=75):
        result = doctest.testmod(module, extraglobs={"ei": ei, "np": np}, optionflags=doctest.ELLIPSIS,
                                 raise_on_error=False, report=True, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} docstring example(s) in {module.__name__} failed (see the output)"


def _public_tensor_members():
    for name, member in vars(ei.Tensor).items():
        if name.startswith("_"):
            continue
        yield f"Tensor.{name}", member.fget if isinstance(member, property) else member
    for module in MODULES:
        for name in module.__all__:
            yield f"{module.__name__}.{name}", getattr(module, name)


@pytest.mark.parametrize("name,member", list(_public_tensor_members()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_name_has_an_example(name, member):
    assert ">>>" in (inspect.getdoc(member) or ""), f"{name} has no runnable example in its docstring"


def test_the_guide_examples():
    """docs/tensor.md's `>>>` examples (the dispatch example among them) run and print what they show."""
    result = doctest.testfile(str(ROOT / "docs" / "tensor.md"), module_relative=False, optionflags=doctest.ELLIPSIS,
                              extraglobs={"ei": ei, "np": np}, raise_on_error=False, report=True, verbose=False)
    assert result.attempted >= 4
    assert result.failed == 0, f"{result.failed} example(s) in docs/tensor.md failed (see the output)"


def test_help_lists_the_public_surface():
    """help(ei.tensor) documents the public names (eidos.tensor.__all__), not the rooms' internals; ei.tensor
    stays callable and ei.tensor.explain reachable."""
    import pydoc

    text = pydoc.render_doc(ei.tensor, renderer=pydoc.plaintext)
    functions = text[text.index("\nFUNCTIONS\n"):text.index("\nDATA\n")]
    data = text[text.index("\nDATA\n"):]
    for name in ("sum", "concat", "concatenate", "explain", "realize", "from_dlpack", "set_backend", "where"):
        assert f"\n    {name}(" in functions or f"\n    {name} = " in functions, name
    for internal in ("lowering_cache", "_CallableModule", "_make", "storage.", "D.", "_host"):
        assert internal not in functions + data, internal
    assert set(ei.tensor.__all__) >= {"Tensor", "tensor", "eager"} - {"tensor"}
    assert all(hasattr(ei.tensor, name) for name in ei.tensor.__all__)
    assert ei.tensor([1, 2]).tolist() == [1, 2] and callable(ei.tensor.explain)
