"""Row order: which plans define the order of their rows (docs/semantics.md section 15).

Operations whose result depends on row order (a window function without `order_by`, `first`,
`last`, `with_row_index`, `tail`) read the order of their input, so that order must be one the plan
defines; an order left unspecified (after a group_by, a join, a distinct, or from a database table)
would give each lane its own answer, so it is refused where the plan is built.
"""

from __future__ import annotations

from eidos.errors import PlanError
from eidos.ir import functions as F
from eidos.ir import nodes as N
from eidos.ir.expr import Window
from eidos.ir.sources import ArrowSource, FileSource, PartSource, RemoteSource

# rows in file order, or in the order of an Arrow table (one in memory, or one an eidos service keeps as sent)
_ORDERED_SOURCES = (FileSource, ArrowSource, RemoteSource)


def has_row_order(node: N.Node) -> bool:
    """Whether the plan defines the order of `node`'s rows."""
    if isinstance(node, N.Scan) and isinstance(node.source, PartSource):   # a split plan's part: its order
        return node.source.plan is None or has_row_order(node.source.plan)
    if isinstance(node, N.Scan):
        return isinstance(node.source, _ORDERED_SOURCES)
    if isinstance(node, N.Sort):
        return True
    if isinstance(node, (N.Filter, N.Project, N.Limit, N.MapBatches, N.Unique, N.Explode)):
        return has_row_order(node.input)
    if isinstance(node, N.Union):
        return all(has_row_order(i) for i in node.inputs)
    if isinstance(node, N.Join) and node.how in ("semi", "anti"):
        return has_row_order(node.left)
    if isinstance(node, N.AsofJoin):
        return has_row_order(node.left)
    if isinstance(node, N.Join) and node.how == "cross":
        return has_row_order(node.left) and has_row_order(node.right)
    return False    # Aggregate, Distinct, and inner/left/right/full joins leave the order unspecified


def require_row_order(node: N.Node, what: str) -> None:
    """Refuse `what` (an operation reading row order) over rows whose order the plan leaves open."""
    if not has_row_order(node):
        raise PlanError(
            f"{what} depends on the order of the rows, and this plan leaves that order unspecified "
            f"(after a group_by, a join, a distinct, or from a database table); sort the flow first "
            f"(.sort(...)) or give an order (over(..., order_by=...))")


def reads_order(w: Window) -> bool:
    """Whether window function `w`'s result depends on the order of a partition's rows (rank only as
    "ordinal", which breaks ties by it)."""
    return w.fn in F.ORDERED_WINDOWS + F.ORDERED_AGGREGATES or (w.fn == "rank" and w.options[:1] == ("ordinal",))


def reads_row_order(w: Window) -> bool:
    """Whether window function `w` reads its input's row order: it reads an order and has no `order_by`."""
    return reads_order(w) and not w.order_by
