"""The trust model for code a plan names: which functions a plan read from JSON may call.

A plan is data and may come from anywhere (a file, a queue, the network), so loading one never
imports or calls anything the loading process has not allowed. A function reference in a plan
(a `udf` column, a `map_batches` step) resolves only to

- a function registered in this process (`ei.register_udf(fn)`, `@ei.udf(dtype)`), by the name
  it was registered under, with no import at all; or
- a function defined in a module the loader names (`trusted_modules=("mypkg",)`: that module and
  its submodules), imported by its `module:qualname`.

Everything else is a PlanError that names the reference and the ways to allow it. Every loader
of plan text goes through `Trust.resolve`: `Flow.from_json`, the `eidos` command, and whatever
later receives plans over the network.

Examples:
    >>> from eidos.hal import trust
    >>> def triple(x):
    ...     return None if x is None else 3 * x
    >>> trust.register_udf(triple, "examples:triple") is triple
    True
    >>> trust.Trust().resolve("examples:triple") is triple
    True
    >>> trust.Trust().resolve("os:system")
    Traceback (most recent call last):
    ...
    eidos.errors.PlanError: the plan names function 'os:system', which this process has not allowed ...
"""

from __future__ import annotations

import importlib
import sys
import threading
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from eidos.errors import PlanError

_lock = threading.Lock()
_by_name: dict[str, Callable] = {}
_names: dict[object, str] = {}   # _key(fn) -> the first name fn was registered under


def _key(fn: object) -> object:
    """Functions by equality where they have it (a bound method is equal to the same method of the same
    object, though each access makes a new one), by identity otherwise (_by_name keeps them alive)."""
    try:
        hash(fn)
    except TypeError:
        return ("id", id(fn))
    return ("fn", fn)


def unwrap(fn: object) -> object:
    """The plain function behind a UDF builder (`@ei.udf` returns one that carries it)."""
    return fn.__eidos_function__ if hasattr(type(fn), "__eidos_function__") else fn


def default_name(fn: object) -> str | None:
    """`module:qualname` of a module-level function, else None (a lambda, a nested function)."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or not module or "<" in qualname:
        return None
    return f"{module}:{qualname}"


def register_udf(fn: Callable, name: str | None = None, *, replace: bool = False) -> Callable:
    """Allow plans loaded in this process to name `fn` as `name` (default `module:qualname`); returns `fn`.

    A plan stores the name, and a plan naming it loads without importing anything: in another
    process, the function must be registered there too (or its module trusted). A lambda or a
    nested function has no default name and needs an explicit one; it is then as good as any
    function, in this process. Registering the same function again changes nothing; a name taken
    by another function is a PlanError unless `replace=True`. Works as a decorator too.

    Examples:
        >>> def keep(batch):
        ...     return batch
        >>> flow = ei.from_pydict({"a": [1, 2]}).map_batches(ei.register_udf(keep), schema={"a": ei.Int64})
        >>> ei.Flow.from_json(flow.to_json()).run().to_pydict()
        {'a': [1, 2]}
        >>> ei.register_udf(lambda b: b, name="examples:identity")
        <function <lambda> at ...>
    """
    fn = unwrap(fn)
    if not callable(fn):
        raise PlanError(f"register_udf takes a function, got {fn!r}")
    if name is None:
        name = default_name(fn)
        if name is None:
            raise PlanError(f"{fn!r} has no module-level name (a lambda or a nested function); "
                            "register it under a name: ei.register_udf(fn, name='myproject:fn')")
    if not isinstance(name, str) or not name.strip():
        raise PlanError(f"a registered function's name must be a non-empty str, got {name!r}")
    key = _key(fn)
    with _lock:
        old = _by_name.get(name)
        if old is not None and old is not fn:
            if not replace:
                raise PlanError(f"the name {name!r} is already registered for {old!r}; pass replace=True to "
                                "register another function under it, or choose another name")
            if _names.get(_key(old)) == name:
                del _names[_key(old)]
        _by_name[name] = fn
        _names.setdefault(key, name)
    return fn


def unregister_udf(name: str) -> None:
    """Forget a registered name (tests; a long-lived process retiring a function)."""
    with _lock:
        fn = _by_name.pop(name, None)
        if fn is not None and _names.get(_key(fn)) == name:
            del _names[_key(fn)]


def registered(name: str) -> Callable | None:
    """The function registered under `name`, or None."""
    with _lock:
        return _by_name.get(name)


def name_of(fn: Callable, what: str) -> str:
    """The name a plan stores for `fn`: its registered name, else `module:qualname` when that finds
    `fn` again in its (already imported) module; a PlanError for a lambda or a closure."""
    with _lock:
        name = _names.get(_key(fn))
    if name is not None:
        return name
    name = default_name(fn)
    hint = ("register it under a name (ei.register_udf(fn, name='myproject:fn')) or define it at module "
            "level so the plan can be stored as JSON")
    if name is None:
        raise PlanError(f"{what} {fn!r} has no importable name (a lambda or a nested function); {hint}")
    module, _, qualname = name.partition(":")
    found = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if unwrap(found) is not fn:
        raise PlanError(f"{what} {name} is not the object of that name in its module; {hint}")
    return name


def _module_name(name: object) -> str:
    if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
        raise PlanError(f"trusted_modules takes module names such as 'mypkg' or 'mypkg.udfs', got {name!r}")
    return name


def _within(module: str, trusted: Iterable[str]) -> bool:
    return any(module == t or module.startswith(t + ".") for t in trusted)


def how_to_allow(ref: str) -> str:
    """The ways to allow a reference, for error messages. Trusting a standard-library module (os,
    subprocess, builtins) would allow everything it defines, so for those only registration is offered."""
    module = ref.partition(":")[0] if ":" in ref else ""
    if module.split(".")[0] in sys.stdlib_module_names:
        return (f"{module!r} is part of Python's standard library, whose modules a plan should never be trusted "
                "with; to allow one function, register it in the loading process: ei.register_udf(fn)")
    if not all(part.isidentifier() and part.isascii() for part in module.split(".")):
        module = ""  # not a module name: not echoed (a plan's text may hold anything, terminal escapes too)
    trusted = f"('{module}',)" if module else "('mypkg',)"
    flag = module or "MODULE"
    return (f"register the function in the loading process (ei.register_udf(fn) or @ei.udf(dtype)), or trust its "
            f"module: Flow.from_json(text, trusted_modules={trusted}), on the command line --trust {flag}")


@dataclass(frozen=True)
class Trust:
    """What a plan being loaded may name: registered functions, and functions of `modules`."""

    modules: tuple[str, ...] = ()

    @classmethod
    def of(cls, trusted_modules: Iterable[str] = ()) -> Trust:
        if isinstance(trusted_modules, (str, bytes)):
            raise PlanError(f"trusted_modules takes a tuple of module names, got the str {trusted_modules!r}; "
                            f"write trusted_modules=({trusted_modules!r},)")
        return cls(tuple(_module_name(m) for m in trusted_modules))

    def resolve(self, ref: str) -> Callable:
        """The function `ref` names, or a PlanError naming it and how to allow it."""
        if not isinstance(ref, str):
            raise PlanError(f"a function reference must be a str such as 'mypkg.udfs:fn', got {ref!r}")
        fn = registered(ref)
        if fn is not None:
            return fn
        module, _, qualname = ref.partition(":")
        parts = qualname.split(".")
        if ":" not in ref or not self.modules or not _within(module, self.modules):
            raise PlanError(f"the plan names function {ref!r}, which this process has not allowed (it is not "
                            f"registered{' and its module is not trusted' if self.modules else ''}); "
                            + how_to_allow(ref))
        if not all(p.isidentifier() and not p.startswith("__") for p in parts) or not all(
                p.isidentifier() for p in module.split(".")):
            raise PlanError(f"the plan names function {ref!r}: expected 'module:name' with a dotted module name "
                            "and a dotted name without dunder parts")
        try:
            obj = importlib.import_module(module)
        except ImportError as e:
            raise PlanError(f"the plan names function {ref!r}, but its trusted module does not import: {e}") from e
        for part in parts:
            obj = getattr(obj, part, None)
            if obj is None or isinstance(obj, types.ModuleType):
                raise PlanError(f"the plan names function {ref!r}, which its module does not define "
                                "(modules are named before the ':', as in 'mypkg.udfs:fn')")
        obj = unwrap(obj)
        if not callable(obj):
            raise PlanError(f"the plan names {ref!r}, which is not a function")
        home = getattr(obj, "__module__", None)
        if not isinstance(home, str) or not _within(home, self.modules):
            raise PlanError(f"the plan names {ref!r}, which is defined in {home!r}, outside the trusted modules "
                            f"{', '.join(self.modules)}: a trusted module allows only what it defines; "
                            + how_to_allow(f"{home}:{parts[-1]}" if isinstance(home, str) else ref))
        return obj
