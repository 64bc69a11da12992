"""Habits the house keeps: the source stays within the line budget set in pyproject.toml."""

from __future__ import annotations

import io
import tokenize
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "eidos"

# Tokens that carry no code: a line holding only these is blank or a comment.
_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.ENDMARKER}


def code_lines(text: str) -> int:
    """Lines holding code: not blank, not comments, not docstrings (a statement that is only a string).

    Docstrings are left out so that documenting a function never counts against the budget.
    """
    lines: set[int] = set()
    statement: list[tokenize.TokenInfo] = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in _NOT_CODE:
            statement.append(tok)
        elif tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) and statement:
            if not all(t.type == tokenize.STRING for t in statement):
                lines.update(n for t in statement for n in range(t.start[0], t.end[0] + 1))
            statement = []
    return len(lines)


def source_lines() -> dict[str, int]:
    return {str(p.relative_to(ROOT)): code_lines(p.read_text(encoding="utf-8")) for p in sorted(SRC.rglob("*.py"))}


def test_code_lines_skips_blanks_comments_and_docstrings():
    text = '''"""A module docstring
over two lines."""

# a comment
import os  # a trailing comment


def f(x):
    """A docstring."""
    sql = """
        select 1
    """
    return (x +
            1)
'''
    # import, def, the three lines of the string assigned to sql, and the two lines of return
    assert code_lines(text) == 7


def test_source_stays_within_its_budget():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    budget = config["tool"]["eidos"]["source-lines-budget"]
    counts = source_lines()
    total = sum(counts.values())
    largest = ", ".join(f"{path} {n}" for path, n in sorted(counts.items(), key=lambda kv: -kv[1])[:5])
    assert total <= budget, (
        f"src/eidos holds {total} lines of code, over the budget of {budget} set in pyproject.toml "
        f"[tool.eidos] source-lines-budget; delete code, or raise the budget there with the reason "
        f"(largest files: {largest})")


def test_no_lane_imports_another_lane():
    """DESIGN: a lane imports ir/, hal/ and its own engine, never another lane (shared pieces live in ir/ or hal/)."""
    import re

    lanes = SRC / "lanes"
    found = []
    for path in sorted(lanes.rglob("*.py")):
        own = path.relative_to(lanes).parts[0]
        for other in re.findall(r"^\s*(?:from|import) eidos\.lanes\.(\w+)", path.read_text(), re.M):
            if other != own:
                found.append(f"{path.relative_to(ROOT)} imports eidos.lanes.{other}")
    assert not found, "\n".join(found)
