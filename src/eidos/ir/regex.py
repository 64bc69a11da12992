"""The one regular-expression dialect of eidos (`str.contains(pattern)`), read once and written for each engine.

A pattern is parsed by Python's own parser into a tree and written back in the syntax every engine reads
alike (RE2 for the reference lane, through pyarrow, and for DuckDB and SQLite; Rust's regex for Polars;
PostgreSQL's AREs), with each construct given one meaning everywhere (docs/semantics.md section 11). Python's
re only reads patterns here, never matches: it backtracks, so a pattern from an untrusted plan such as
`(a+)+$` could hold it for hours, where RE2 and Rust's regex run in time linear in the text:

- `.` is any character but a newline; `\\d`, `\\w` and `\\s` are ASCII (`[0-9]`, `[0-9A-Za-z_]`, the six
  ASCII spaces), as RE2 reads them: the engines' Unicode classes differ, so they are written out;
- `^` and `$` are the start and end of the text (Python's `$` would also match before a final newline);
- `?`, `*`, `+`, `{m,n}` (n at most 255, PostgreSQL's limit; nested counts multiplying to at most 1000,
  RE2's), groups and `|`; lazy repeats are accepted (whether a pattern matches somewhere does not depend on
  greediness; replacing keeps them lazy, and groups capturing, with `capture=True`).

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
MAX_NESTED = 1000  # the largest product of nested repeat counts RE2 reads (its RepetitionWalker)
MAX_GROUP = 9      # the highest group a replacement names (RE2's rewrite strings read \\0 to \\9)
_SPACE = "\t\n\x0b\x0c\r "
_CLASSES = {C.CATEGORY_DIGIT: "0-9", C.CATEGORY_WORD: "0-9A-Za-z_", C.CATEGORY_SPACE: _SPACE}
_NEGATED = {C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT, C.CATEGORY_NOT_WORD: C.CATEGORY_WORD,
            C.CATEGORY_NOT_SPACE: C.CATEGORY_SPACE}
_REFUSED = {C.GROUPREF: "a backreference", C.GROUPREF_EXISTS: "a conditional group",
            C.ASSERT: "a lookahead or lookbehind", C.ASSERT_NOT: "a negative lookahead or lookbehind",
            C.ATOMIC_GROUP: "an atomic group", C.POSSESSIVE_REPEAT: "a possessive repeat"}
ENGINES = ("rust", "re2", "postgresql")


def _refuse(pattern: str, what: str) -> PlanError:
    return PlanError(f"regular expression {pattern!r}: {what} is not in eidos' portable dialect (which every "
                     f"lane matches alike; docs/semantics.md section 11); rewrite it, or match the text as it is "
                     f"with literal=True")


@functools.lru_cache(maxsize=512)
def _parse(pattern: str):
    if not isinstance(pattern, str):
        raise PlanError(f"a regular expression is a string, got {type(pattern).__name__}")
    try:
        tree = P.parse(pattern)
    except re.error as e:
        raise PlanError(f"regular expression {pattern!r} does not parse: {e}") from None
    if tree.state.flags & ~(re.UNICODE):
        raise _refuse(pattern, "an inline flag such as (?i)")
    return tree


@functools.lru_cache(maxsize=512)
def render(pattern: str, engine: str, *, capture: bool = False) -> str:
    """`pattern` written for `engine` (one of ENGINES), or a PlanError naming what the dialect lacks; with
    `capture` its groups capture (numbered as written, names dropped), else every group is (?:...)."""
    return _Writer(pattern, engine, capture).seq(_parse(pattern))


def escape(text: str) -> str:
    """A pattern of the dialect matching `text` as it is."""
    return "".join(_char(c) for c in text)


def validate(pattern: str) -> str:
    """`pattern`, once it is known to be in the dialect (PlanError otherwise)."""
    render(pattern, "re2")
    return pattern


def replacement(pattern: str, value: str) -> tuple[str | int, ...]:
    """The replacement `value` for matches of `pattern`, as text and group numbers: `$n` or `${n}` is group n
    (0 the whole match, at most 9), `${name}` or `$name` a named group, `$$` a dollar sign, any other `$` itself
    (as Polars reads it); a group the pattern lacks, or `$n` run into a letter (`$1a`), is a PlanError."""
    if not isinstance(value, str):
        raise PlanError(f"a replacement is a string, got {type(value).__name__}")
    render(pattern, "re2", capture=True)   # the pattern is in the dialect
    state = _parse(pattern).state
    pieces: list[str | int] = []
    for m in re.finditer(r"\$(?:\$|\{(\w+)\}|([0-9A-Za-z_]+))|[^$]+|\$", value):
        name = m.group(1) or m.group(2)
        if name is None:
            pieces.append(m.group()[:1] if m.group() == "$$" else m.group())
            continue
        group = int(name) if name.isdigit() else state.groupdict.get(name)
        if m.group(2) and name[:1].isdigit() and not name.isdigit():
            raise PlanError(f"replacement {value!r}: ${name} reads as one group name; write ${{{name[0]}}}"
                            f"{name[1:]} for group {name[0]} followed by text")
        if group is None or group > state.groups - 1 or group > MAX_GROUP:
            have = f"groups 0 to {min(state.groups - 1, MAX_GROUP)}" + "".join(f", {n!r}" for n in state.groupdict)
            raise PlanError(f"replacement {value!r} names group {name!r}, which the pattern {pattern!r} has not "
                            f"(it has {have}; a replacement names groups up to {MAX_GROUP}); write $$ for a "
                            f"dollar sign")
        pieces.append(group)
    return tuple(pieces)


def rewrite(pieces: tuple[str | int, ...], engine: str) -> str:
    """A replacement (from `replacement`) as `engine` writes it: `${n}` and `$$` for Rust's regex, `\\n`
    and `\\\\` for RE2 and PostgreSQL (whose whole match is `\\&`)."""
    if engine == "rust":
        return "".join(f"${{{p}}}" if isinstance(p, int) else p.replace("$", "$$") for p in pieces)
    whole = "\\&" if engine == "postgresql" else "\\0"
    return "".join((f"\\{p}" if p else whole) if isinstance(p, int) else p.replace("\\", "\\\\") for p in pieces)


class _Writer:
    def __init__(self, pattern: str, engine: str, capture: bool = False):
        self.pattern, self.engine, self.capture, self.room = pattern, engine, capture, MAX_NESTED

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
            group, add, remove, body = av
            if add or remove:
                raise _refuse(self.pattern, "a flag inside a group, such as (?i:...)")
            return ("(" if self.capture and group is not None else "(?:") + self.seq(body) + ")"
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            low, high, body = av
            if low > MAX_COUNT or (high is not C.MAXREPEAT and high > MAX_COUNT):
                raise _refuse(self.pattern, f"a repeat count over {MAX_COUNT}")
            count = f"{{{low},}}" if high is C.MAXREPEAT else f"{{{low}}}" if low == high else f"{{{low},{high}}}"
            outer, times = self.room, low if high is C.MAXREPEAT else high
            self.room //= max(times, 1)
            if not self.room:
                raise _refuse(self.pattern, f"repeats nested so that their counts multiply past {MAX_NESTED}")
            body = self.seq(body)
            self.room = outer
            return "(?:" + body + ")" + count + ("?" if op is C.MIN_REPEAT and self.capture else "")
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
            return "$"
        raise _refuse(self.pattern, "a word boundary (\\b or \\B)")


def _class_text(cat) -> str:
    return _CLASSES[cat] if cat is not C.CATEGORY_SPACE else "".join(_char(c, in_class=True) for c in _SPACE)


def _char(c: str, *, in_class: bool = False) -> str:
    """One character as itself: punctuation escaped with a backslash (every engine reads `\\` before a
    non-alphanumeric character as that character), others as they are."""
    specials = "\\]^-[" if in_class else "\\.^$|?*+()[]{}"
    return "\\" + c if c in specials else c
