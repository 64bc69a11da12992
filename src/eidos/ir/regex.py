"""The one regular-expression dialect of eidos (`str.contains(pattern)`), read once and written for each engine.

A pattern is parsed by Python's own parser into a tree and written back in the syntax every engine reads
alike (Python's re for the reference lane, Rust's regex for Polars, RE2 for DuckDB, PostgreSQL's
AREs), with each construct given one meaning everywhere (docs/semantics.md section 11):

- `.` is any character but a newline; `\\d`, `\\w` and `\\s` are ASCII (`[0-9]`, `[0-9A-Za-z_]`, the six
  ASCII spaces), as RE2 reads them: the engines' Unicode classes differ, so they are written out;
- `^` and `$` are the start and end of the text (Python's `$` would also match before a final newline);
- `?`, `*`, `+`, `{m,n}` (n at most 255, PostgreSQL's limit), groups and `|`; lazy repeats are accepted
  (whether a pattern matches somewhere does not depend on greediness).

Refused with a PlanError naming the construct: backreferences, lookaround, `\\b`, flags (`(?i)`...),
atomic groups and possessive repeats, which one engine or another lacks or reads its own way.
"""

from __future__ import annotations

import functools
import re
import re._constants as C  # noqa: N812 - the constants of Python's regex parser
import re._parser as P  # noqa: N812 - Python's regex parser, the reading every lane's pattern starts from

from eidos.errors import PlanError

MAX_COUNT = 255   # the largest bounded repeat PostgreSQL reads
_SPACE = "\t\n\x0b\x0c\r "
_CLASSES = {C.CATEGORY_DIGIT: "0-9", C.CATEGORY_WORD: "0-9A-Za-z_", C.CATEGORY_SPACE: _SPACE}
_NEGATED = {C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT, C.CATEGORY_NOT_WORD: C.CATEGORY_WORD,
            C.CATEGORY_NOT_SPACE: C.CATEGORY_SPACE}
_REFUSED = {C.GROUPREF: "a backreference", C.GROUPREF_EXISTS: "a conditional group",
            C.ASSERT: "a lookahead or lookbehind", C.ASSERT_NOT: "a negative lookahead or lookbehind",
            C.ATOMIC_GROUP: "an atomic group", C.POSSESSIVE_REPEAT: "a possessive repeat"}
ENGINES = ("python", "rust", "re2", "postgresql")


def _refuse(pattern: str, what: str) -> PlanError:
    return PlanError(f"regular expression {pattern!r}: {what} is not in eidos' portable dialect (which every "
                     f"lane matches alike; docs/semantics.md section 11); rewrite it, or match the text as it is "
                     f"with literal=True")


@functools.lru_cache(maxsize=512)
def render(pattern: str, engine: str) -> str:
    """`pattern` written for `engine` (one of ENGINES), or a PlanError naming what the dialect lacks."""
    if not isinstance(pattern, str):
        raise PlanError(f"a regular expression is a string, got {type(pattern).__name__}")
    try:
        tree = P.parse(pattern)
    except re.error as e:
        raise PlanError(f"regular expression {pattern!r} does not parse: {e}") from None
    if tree.state.flags & ~(re.UNICODE):
        raise _refuse(pattern, "an inline flag such as (?i)")
    return _Writer(pattern, engine).seq(tree)


def validate(pattern: str) -> str:
    """`pattern`, once it is known to be in the dialect (PlanError otherwise)."""
    render(pattern, "python")
    return pattern


class _Writer:
    def __init__(self, pattern: str, engine: str):
        self.pattern, self.engine = pattern, engine

    def seq(self, items) -> str:
        return "".join(self.item(op, av) for op, av in items)

    def item(self, op, av) -> str:
        if op in _REFUSED:
            raise _refuse(self.pattern, _REFUSED[op])
        if op is C.LITERAL:
            return _char(chr(av))
        if op is C.NOT_LITERAL:
            return "[^" + _char(chr(av), in_class=True) + "]"
        if op is C.ANY:
            return "[^\n]"
        if op is C.IN:
            return self.klass(av)
        if op is C.AT:
            return self.anchor(av)
        if op is C.BRANCH:
            return "(?:" + "|".join(self.seq(b) for b in av[1]) + ")"
        if op is C.SUBPATTERN:
            _group, add, remove, body = av
            if add or remove:
                raise _refuse(self.pattern, "a flag inside a group, such as (?i:...)")
            return "(?:" + self.seq(body) + ")"
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            low, high, body = av
            if low > MAX_COUNT or (high is not C.MAXREPEAT and high > MAX_COUNT):
                raise _refuse(self.pattern, f"a repeat count over {MAX_COUNT}")
            count = f"{{{low},}}" if high is C.MAXREPEAT else f"{{{low}}}" if low == high else f"{{{low},{high}}}"
            return "(?:" + self.seq(body) + ")" + count
        if op is C.CATEGORY:
            return self.category(av)
        raise _refuse(self.pattern, f"{str(op).lower()}")

    def category(self, cat) -> str:
        if cat in _CLASSES:
            return "[" + _class_text(cat) + "]"
        if cat in _NEGATED:
            return "[^" + _class_text(_NEGATED[cat]) + "]"
        raise _refuse(self.pattern, "a word boundary (\\b or \\B)")

    def klass(self, items) -> str:
        negate, parts, others = "", [], []
        for op, av in items:
            if op is C.NEGATE:
                negate = "^"
            elif op is C.LITERAL:
                parts.append(_char(chr(av), in_class=True))
            elif op is C.RANGE:
                parts.append(_char(chr(av[0]), in_class=True) + "-" + _char(chr(av[1]), in_class=True))
            elif op is C.CATEGORY and av in _CLASSES:
                parts.append(_class_text(av))
            elif op is C.CATEGORY and av in _NEGATED:
                others.append("[^" + _class_text(_NEGATED[av]) + "]")
            else:
                raise _refuse(self.pattern, f"{str(op).lower()} in a [...] set")
        if not others:
            return "[" + negate + "".join(parts) + "]"
        if negate:   # not (a, or not a digit): no one class says it alike everywhere
            raise _refuse(self.pattern, "a negated class (\\D, \\W, \\S) inside a negated [^...] set")
        return "(?:" + "|".join(([f"[{''.join(parts)}]"] if parts else []) + others) + ")"

    def anchor(self, at) -> str:
        if at in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):
            return "^"
        if at in (C.AT_END, C.AT_END_STRING):
            return r"\Z" if self.engine == "python" else "$"
        raise _refuse(self.pattern, "a word boundary (\\b or \\B)")


def _class_text(cat) -> str:
    return _CLASSES[cat] if cat is not C.CATEGORY_SPACE else "".join(_char(c, in_class=True) for c in _SPACE)


def _char(c: str, *, in_class: bool = False) -> str:
    """One character as itself: punctuation escaped with a backslash (every engine reads `\\` before a
    non-alphanumeric character as that character), others as they are."""
    specials = "\\]^-[" if in_class else "\\.^$|?*+()[]{}"
    return "\\" + c if c in specials else c
