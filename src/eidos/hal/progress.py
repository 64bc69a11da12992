"""A progress bar for runs longer than a second: steps done (the parts of a split plan, then the plan),
the lane at work and the time so far, drawn by rich on stderr and gone when the run ends.

Shown where someone watches: a terminal, or a notebook (where rich needs ipywidgets to redraw). Off in
pipes and files, with `EIDOS_PROGRESS=0` (`1` shows it anywhere), or `run(progress=False)`.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from eidos.errors import PlanError

DELAY_S = 1.0      # a run shorter than this shows nothing
REFRESH_S = 0.1


@functools.cache
def console():
    """One console for every run (it reads sys.stderr at each use, so a redirected stream is followed)."""
    from rich.console import Console

    return Console(stderr=True)


def wanted(progress: bool | None, out) -> bool:
    """Whether to show a bar: `progress` when given, else EIDOS_PROGRESS, else whether `out` is watched."""
    if progress is not None:
        return bool(progress)
    setting = os.environ.get("EIDOS_PROGRESS", "").strip().lower()
    if setting in ("0", "off", "false", "no"):
        return False
    if setting in ("1", "on", "true", "yes"):
        return True
    if setting:
        raise PlanError(f"EIDOS_PROGRESS is 1 (show a progress bar) or 0 (never), not {setting!r}")
    if out.is_jupyter:
        import importlib.util

        return importlib.util.find_spec("ipywidgets") is not None
    return out.is_terminal


@contextmanager
def watching(progress: bool | None, total: int, status: Callable[[], tuple[int, str]]) -> Iterator[None]:
    """Within the block, after DELAY_S, a bar of `total` steps; `status()` gives (steps done, lane at work)."""
    if progress is False or not wanted(progress, out := console()):
        yield
        return
    done = threading.Event()
    thread = threading.Thread(target=_draw, args=(out, total, status, done), name="eidos-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _draw(out, total: int, status, done: threading.Event) -> None:
    if done.wait(DELAY_S):
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("eidos: {task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=out, transient=True) as bar:
        task = bar.add_task("", total=total)
        while True:
            steps, lane = status()
            bar.update(task, completed=steps, description=f"running on {lane}")
            if done.wait(REFRESH_S):
                return
