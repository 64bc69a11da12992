"""HTML for notebooks: the pieces every `_repr_html_` in eidos is made of.

Every text that came from data or a plan (column names, values, SQL) is escaped here, so a name such as
`<script>` shows as text and never runs in the notebook.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

# At most this many rows of a table are shown; the rest are counted.
MAX_ROWS = 40

_STYLE = ("font-family: var(--jp-code-font-family, monospace); font-size: 12px; "
          "border-left: 3px solid #7b61ff; padding: 4px 8px; margin: 4px 0")


def box(title: str, subtitle: str, *sections: str) -> str:
    """A titled block: the kind of object in bold, a line of facts, then its sections."""
    body = "".join(sections)
    return (f'<div class="eidos" style="{_STYLE}"><strong>{escape(title)}</strong> '
            f'<span>{escape(subtitle)}</span>{body}</div>')


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A small table, at most MAX_ROWS rows, then how many more there are."""
    rows = list(rows)
    head = "".join(f"<th style='text-align:left'>{escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{escape(str(v))}</td>" for v in row) + "</tr>"
                   for row in rows[:MAX_ROWS])
    more = f"<div>... {len(rows) - MAX_ROWS} more</div>" if len(rows) > MAX_ROWS else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def line(words: str) -> str:
    """One line of escaped text in its own row."""
    return f"<div>{escape(words)}</div>"


def text(lines: str) -> str:
    """Preformatted text (a plan tree, a disassembly, values), escaped."""
    return f"<pre style='margin:4px 0'>{escape(lines)}</pre>"


def folded(summary: str, content: str, *, open_: bool = False) -> str:
    """A section the reader opens with a click."""
    return f"<details{' open' if open_ else ''}><summary>{escape(summary)}</summary>{content}</details>"
