"""Results computed once per plan object: plans are immutable, and the planner asks the same
questions of the same (optimized, cached) plan on every run.

Keyed by identity, not structure: hashing a plan walks all of it, which costs more than most
lookups save. An entry goes when its plan is garbage collected.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TypeVar

R = TypeVar("R")

_MEMO: dict[int, tuple[weakref.ref, dict[str, object]]] = {}


def once(plan: object, key: str, compute: Callable[[], R]) -> R:
    """compute(), the first time `key` is asked of this plan object; its stored result after."""
    held = _MEMO.get(id(plan))
    if held is None or held[0]() is not plan:
        ident = id(plan)
        # the dict's own pop, bound now: at interpreter exit a plan may outlive this module's globals
        held = _MEMO[ident] = (weakref.ref(plan, lambda _, ident=ident, pop=_MEMO.pop: pop(ident, None)), {})
    results = held[1]
    if key not in results:
        results[key] = compute()
    return results[key]  # type: ignore[return-value]
