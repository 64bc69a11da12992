"""The strftime/strptime format codes eidos shares with every lane (docs/semantics.md section 12).

A portable subset of chrono's and C's codes, each with one meaning everywhere: `parse_format` splits a
format into codes and literal text, refusing what is outside the subset by name; `format_value` and
`parse_text` are the reference lane's meaning; lanes translate the same parts into their engine's syntax.
"""

from __future__ import annotations

import datetime as _dt
import re

from eidos.errors import PlanError

_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")

# code -> how a value reads in it (strftime); English names, zero-padded numbers.
FORMAT = {
    "Y": lambda t: f"{t.year:04d}", "y": lambda t: f"{t.year % 100:02d}", "m": lambda t: f"{t.month:02d}",
    "d": lambda t: f"{t.day:02d}", "j": lambda t: f"{t.timetuple().tm_yday:03d}",
    "H": lambda t: f"{t.hour:02d}", "I": lambda t: f"{(t.hour + 11) % 12 + 1:02d}", "M": lambda t: f"{t.minute:02d}",
    "S": lambda t: f"{t.second:02d}", "f": lambda t: f"{t.microsecond:06d}",
    "p": lambda t: "AM" if t.hour < 12 else "PM",
    "a": lambda t: _DAYS[t.weekday()][:3], "A": lambda t: _DAYS[t.weekday()],
    "b": lambda t: _MONTHS[t.month - 1][:3], "B": lambda t: _MONTHS[t.month - 1],
}
TIME_CODES = frozenset("HIMSfp")
# code -> the text it reads when parsing (strptime): exact widths, so every engine reads the same values.
PARSE = {"Y": "([0-9]{4})", "m": "([0-9]{2})", "d": "([0-9]{2})", "H": "([0-9]{2})", "M": "([0-9]{2})",
         "S": "([0-9]{2})", "f": "([0-9]{6})", "b": "(" + "|".join(m[:3] for m in _MONTHS) + ")"}

Part = tuple[str, str]  # ("code", "Y") or ("text", "-")


def parse_format(fmt: str, *, parsing: bool = False) -> list[Part]:
    """The codes and literal text of `fmt`; PlanError naming a code outside the portable subset."""
    if not isinstance(fmt, str):
        raise PlanError(f"a date/time format is a str such as '%Y-%m-%d %H:%M', got {fmt!r}")
    codes = PARSE if parsing else FORMAT
    parts: list[Part] = []
    i = 0
    while i < len(fmt):
        if fmt[i] != "%":
            j = fmt.find("%", i)
            j = len(fmt) if j < 0 else j
            parts.append(("text", fmt[i:j]))
            i = j
            continue
        code = fmt[i + 1:i + 2]
        if code == "%":
            parts.append(("text", "%"))
        elif code not in codes:
            what = "reading" if parsing else "writing"
            raise PlanError(f"format {fmt!r}: %{code} is not a code eidos reads alike on every lane; codes for "
                            f"{what}: {' '.join('%' + c for c in codes)} and %% (semantics section 12)")
        else:
            parts.append(("code", code))
        i += 2
    have = {x for kind, x in parts if kind == "code"}
    if parsing and not ({"Y", "d"} <= have and have & {"m", "b"}):
        raise PlanError(f"format {fmt!r} must name the year (%Y), month (%m or %b) and day (%d) to be read: "
                        "engines fill missing ones differently")
    if parsing and have & TIME_CODES and have & TIME_CODES not in ({"H", "M"}, {"H", "M", "S"}, {"H", "M", "S", "f"}):
        raise PlanError(f"format {fmt!r} reads the time as hours and minutes (%H %M), then seconds (%S), then "
                        "microseconds (%f), each only with those before it")
    return parts


def spelled(parts: list[Part], codes: dict[str, str], text) -> str:
    """The format in an engine's syntax: each code through `codes` (as itself where absent), text through `text`."""
    return "".join(codes.get(x, "%" + x) if kind == "code" else text(x) for kind, x in parts)


def format_value(t: _dt.date, parts: list[Part]) -> str:
    if not isinstance(t, _dt.datetime):
        t = _dt.datetime.combine(t, _dt.time())
    return "".join(FORMAT[x](t) if kind == "code" else x for kind, x in parts)


def pattern(parts: list[Part]) -> str:
    """A regular expression (of the portable dialect) that matches exactly the text `parts` reads."""
    return "".join(PARSE[x] if kind == "code" else re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", x) for kind, x in parts)


def parse_text(s: str, parts: list[Part]) -> _dt.datetime | None:
    """The timestamp `s` names in the format; None where it does not match or names no real time.
    Fields not in the format are the first of their range (year 1970, January, day 1, midnight)."""
    m = re.fullmatch(pattern(parts), s, re.ASCII)
    if m is None:
        return None
    f = {"Y": 1970, "m": 1, "d": 1, "H": 0, "M": 0, "S": 0, "f": 0}
    for code, value in zip((x for kind, x in parts if kind == "code"), m.groups()):
        f[code] = [m[:3] for m in _MONTHS].index(value) + 1 if code == "b" else int(value)
        if code == "b":
            f["m"] = f[code]
    try:
        return _dt.datetime(f["Y"], f["m"], f["d"], f["H"], f["M"], f["S"], f["f"])
    except ValueError:
        return None
