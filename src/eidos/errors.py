"""The one exception hierarchy: every error a user sees from eidos is an EidosError."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class EidosError(Exception):
    """Root of every error eidos raises on purpose. Its text holds no control character but newlines and
    tabs: any other (a terminal escape in a column name, in a file or in an engine's message) shows as its
    escape, `\\x1b`, so printing an error never drives the terminal."""

    def __str__(self) -> str:
        return escaped(super().__str__())


def escaped(text: str) -> str:
    """`text` with each character that is not printable, other than a newline or a tab, as its escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in text)


def shown(name: str) -> str:
    """A name from a plan, a file or data (a column, a key, a uri) as messages and explain() show it: as
    written when every character is printable, else its repr (`'a\\x1b[2Jb'`): an escape, a newline or a
    bidirectional control in a name never reaches a terminal, nor passes for another name."""
    return name if isinstance(name, str) and name.isprintable() else repr(name)


class PlanError(EidosError):
    """A bad plan: a missing column, a type error, a bad argument to a Flow method."""


class UnsupportedError(EidosError):
    """A lane or kernel backend cannot do something; names the thing."""


class BackendUnavailable(EidosError):
    """A lane or backend cannot run here; names why and how to install it."""


class ExecutionError(EidosError):
    """The engine failed while running; the engine's exception is chained with `from`."""


class ResourceError(ExecutionError):
    """A run needs more memory than the budget allows (EIDOS_MEMORY_BUDGET); names the budget, what the
    run needed it for and the smallest budget that would do."""


class IsaError(EidosError):
    """A bad ISA program; names the instruction index and the problem."""


class BackendError(EidosError):
    """A bad kernel-backend call: bad handle, out of bounds, use after free."""


class CommandError(EidosError):
    """A bad command line or input file (missing plan, unknown output format)."""


class DeviceError(EidosError):
    """Tensors on different devices in one operation, or a device that is not there; names both and the fix."""


class ShapeError(EidosError, ValueError):
    """Shapes that do not broadcast or do not fit an operation; names the shapes."""


class AxisError(EidosError, IndexError):
    """An axis out of range for a tensor's number of dimensions."""


class DTypeError(EidosError, TypeError):
    """A dtype the tensor layer does not take, or an operation a dtype does not support (a TypeError, as the
    Array API standard asks for a dtype an operation does not accept)."""


class FFTArgumentError(EidosError, ValueError):
    """A bad `norm` for an fft function."""


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """' did you mean 'x'?' for the closest candidate, or '' when none is close."""
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""


def no_such(what: str, name: str, known: Iterable[str]) -> BackendUnavailable:
    """The error for a name no registry entry has: the names there are, and the closest one."""
    known = list(known)
    hint = did_you_mean(name, known)
    return BackendUnavailable(f"no {what} called {name!r}; {what}s: {', '.join(known) or 'none'}"
                              + (f"; {hint}" if hint else ""))


class FallbackWarning(UserWarning):
    """A lane raised UnsupportedError at run time and the next capable lane took over."""
