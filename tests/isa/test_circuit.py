"""Circuits over class memory: the parser (good text, bad text, generated circuits) and every
translated circuit on every target, leaving the reference's class memory and phases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eidos import isa
from eidos.errors import IsaError
from eidos.isa import CLASS_MEMORY_BYTES, LaunchConfig, Type, circuit
from eidos.isa.backends.reference import ReferenceBackend
from eidos.isa.circuit import GENERATORS, Call, Parallel, Sequence
from eidos.testing.strategies import examples

SLOW_OK = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


# ---- generated circuits ------------------------------------------------------------------------

def _calls(classes):
    single = st.builds(lambda g, c: Call(g, None, (c,), "c"), st.sampled_from(["mark", "quote", "evaluate"]), classes)
    copy = st.builds(lambda a, b: Call("copy", None, (a, b), "c->c"), classes, classes)
    swap = st.builds(lambda a, b: Call("swap", None, (a, b), "c<->c"), classes, classes).filter(
        lambda c: c.classes[0] != c.classes[1])
    variants = [(g, v) for g in ("merge", "split") for v in GENERATORS[g][1]]
    binary = st.builds(lambda gv, d, a, b: Call(gv[0], gv[1], (d, a, b), "c[c,c]"),
                       st.sampled_from(variants), classes, classes, classes)
    return st.one_of(single, copy, swap, binary)


def _valid(node) -> bool:
    try:
        circuit.validate(node)
    except IsaError:
        return False
    return True


def circuits(classes=st.integers(0, 95)):  # noqa: B008 - a strategy is an immutable description
    """Valid syntax trees in the parser's normal form (nested sequences and parallels flattened)."""
    tree = st.recursive(_calls(classes), lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: circuit.join(Sequence, xs)),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: circuit.join(Parallel, xs))), max_leaves=6)
    return tree.filter(_valid)


@settings(max_examples=examples(200), deadline=None)
@given(node=circuits())
def test_generated_circuits_print_and_parse_back(node):
    text = str(node)
    assert circuit.parse(text) == node
    assert circuit.parse(text.replace(" ", "")) == node
    assert isa.compile_circuit(text).metadata["eidos.isa.circuit"] == text


@settings(max_examples=examples(300), deadline=None)
@given(text=st.text(alphabet="mergcopyswaplitquvd@:c0123456789[],-<>|.() ", max_size=30))
def test_any_text_parses_or_raises_isa_error(text):
    try:
        node = circuit.parse(text)
    except IsaError as e:
        assert str(e).startswith("circuit, position ")
        return
    assert circuit.parse(str(node)) == node


# ---- hand-written text -------------------------------------------------------------------------

@pytest.mark.parametrize("text,canonical", [
    ("merge@c00[c01,c02]", "merge@c00[c01,c02]"),
    ("merge:add@c0[c1,c2]", "merge@c00[c01,c02]"),
    ("  split:div @ c10 [ c11 , c12 ]  ", "split:div@c10[c11,c12]"),
    ("mark@c05 . copy@c05->c06 . swap@c06<->c07", "mark@c05 . copy@c05->c06 . swap@c06<->c07"),
    ("(mark@c01 || mark@c02) . quote@c03 . evaluate@c03", "(mark@c01 || mark@c02) . quote@c03 . evaluate@c03"),
    ("mark@c01 || mark@c02 . mark@c03", "mark@c01 || mark@c02 . mark@c03"),
    ("((mark@c01 . mark@c02)) . (mark@c03)", "mark@c01 . mark@c02 . mark@c03"),
    ("merge:max@c95[c94,c93]", "merge:max@c95[c94,c93]"),
])
def test_good_text(text, canonical):
    assert str(circuit.parse(text)) == canonical


@pytest.mark.parametrize("text,position,message", [
    ("", 0, "expected a generator (mark, copy, swap, merge, split, quote, evaluate) or '(', got the end"),
    ("merge", 5, "expected '@' after 'merge' (e.g. merge@c00[c01,c02])"),
    ("merge@", 6, "expected a class (c0..c95, e.g. c05), got the end of the circuit"),
    ("merge@c96[c01,c02]", 6, "class c96 is out of range c0..c95"),
    ("merge@c00[c01]", 13, "expected ',' between the two operand classes, got ']'"),
    ("merge@c00[c01,c02", 17, "expected ']' closing the operand classes"),
    ("mark@c00->c01", 0, "mark takes one class (mark@c05), got a source and a destination class"),
    ("copy@c00", 0, "copy takes a source and a destination class (cA->cB) (copy@c05->c06), got one class"),
    ("merg@c00", 0, "unknown generator 'merg'; did you mean 'merge'?"),
    ("merge:pow@c00[c01,c02]", 6, "merge has no variant 'pow'; variants: one of add, mul, min, max"),
    ("quote:x@c01", 6, "quote has no variant 'x'; variants: none"),
    ("swap@c01<->c01", 0, "swap exchanges two different classes"),
    ("copy@c01->c02 || mark@c02", 17, "both use class c02 and one writes it; run them in sequence"),
    ("quote@c01 || evaluate@c01", 13, "both use phase c01"),
    ("(mark@c01", 9, "expected ')' closing the group"),
    ("mark@c01)", 8, "expected '.', '||' or the end of the circuit, got ')'"),
    ("mark@c01 . ", 11, "expected a generator"),
    ("mark@x01", 5, "expected a class (c0..c95, e.g. c05), got 'x01'"),
    ("mark@c01 $", 9, "unexpected character '$'"),
    ("mark@c01 mark@c02", 9, "got 'mark'"),
])
def test_bad_text_names_the_position_and_what_was_expected(text, position, message):
    with pytest.raises(IsaError) as e:
        circuit.parse(text)
    first, shown, caret = str(e.value).split("\n")
    assert first.startswith(f"circuit, position {position}: ") and message in first
    assert shown == f"  {text}" and caret == "  " + " " * position + "^"


def test_hand_built_trees_are_validated():
    with pytest.raises(IsaError, match="class 96 is out of range 0..95"):
        circuit.translate(Call("mark", None, (96,), "c"))
    with pytest.raises(IsaError, match="merge takes a destination and two operand classes"):
        circuit.validate(Call("merge", "add", (1, 2), "c[c,c]"))
    with pytest.raises(IsaError, match="merge has no variant None"):
        circuit.validate(Call("merge", None, (1, 2, 3), "c[c,c]"))
    with pytest.raises(IsaError, match="element type I128 is wider than 64 bits"):
        isa.compile_circuit("mark@c01", Type.I128)
    with pytest.raises(IsaError, match="circuit: expected the circuit's text"):
        circuit.parse(3)
    assert isa.compile_circuit("mark@c01", "i32").instructions[0].ty is Type.I32


# ---- every target against the reference ------------------------------------------------------------

def _run(backend, program, data: bytes, lanes: int = 1):
    """The class memory after the program, and how far it moved each phase (mod 768)."""
    backend.copy_to_class(0, 0, data)
    before = backend.phases()
    backend.execute_program(program, LaunchConfig.linear(lanes))
    out = np.zeros(CLASS_MEMORY_BYTES, np.uint8)
    backend.copy_from_class(0, 0, out)
    return out, [(a - b) % 768 for a, b in zip(backend.phases(), before)]


def _same(got: np.ndarray, want: np.ndarray, ty: Type) -> bool:
    """Bit-identical, except that a NaN matches any NaN (docs/isa.md, Precision)."""
    if ty.is_float:
        g, w = got.view(ty.np_dtype), want.view(ty.np_dtype)
        nan = np.isnan(g.astype(np.float64)) & np.isnan(w.astype(np.float64))
        return bool(np.all((got.view(f"u{ty.size_bytes}") == want.view(f"u{ty.size_bytes}")) | nan))
    return bool(np.array_equal(got, want))


def _class_data(ty: Type, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    n = CLASS_MEMORY_BYTES // ty.size_bytes
    if ty.is_float:
        values = rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e3], n)
        values[rng.integers(0, n, 16)] = 0.0
        return values.astype(ty.np_dtype).tobytes()
    return rng.integers(ty.min_value, ty.max_value, n, dtype=ty.np_dtype, endpoint=True).tobytes()


@settings(max_examples=examples(15), deadline=None, suppress_health_check=SLOW_OK)
@given(node=circuits(st.integers(0, 7)), ty=st.sampled_from([Type.F32, Type.I32, Type.F64, Type.U8]),
       seed=st.integers(0, 2**16))
def test_every_circuit_leaves_the_reference_class_memory_on_every_target(backend, node, ty, seed):
    program = circuit.translate(node, ty)
    data = _class_data(ty, seed)
    got, got_phases = _run(backend, program, data, lanes=seed % 3 * 16 + 1)
    want, want_phases = _run(ReferenceBackend(), program, data)
    assert _same(got, want, ty) and got_phases == want_phases


def test_generators_do_what_docs_say(backend):
    a = np.arange(1, 3073, dtype=np.float32)
    b = np.full(3072, 2.0, np.float32)
    backend.copy_to_class(1, 0, a)
    backend.copy_to_class(2, 0, b)
    program = isa.compile_circuit("merge@c00[c01,c02] . split:div@c03[c01,c02] . copy@c01->c04 . mark@c04 . "
                                  "swap@c01<->c02 . merge:min@c05[c01,c02] . (quote@c06 || quote@c07) . "
                                  "quote@c06 . evaluate@c07 . evaluate@c08")
    backend.execute_program(program, LaunchConfig.linear(48))  # any launch: phases move once per call
    cls = {k: np.zeros(3072, np.float32) for k in range(6)}
    for k, out in cls.items():
        backend.copy_from_class(k, 0, out)
    assert cls[0].tolist() == (a + b).tolist() and cls[3].tolist() == (a / b).tolist()
    assert cls[4].tolist() == (-a).tolist()
    assert cls[1].tolist() == b.tolist() and cls[2].tolist() == a.tolist()
    assert cls[5].tolist() == np.minimum(a, b).tolist()
    assert backend.phases()[6:9] == [2, 0, 767]
