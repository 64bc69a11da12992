"""Which files a path names, and what hive-style folder names say about them.

A folder is walked recursively, every name that starts with '.' skipped (as a glob skips it). A link
is followed only when its target lies inside the folder, and each file is read once however many
links lead to it (by the path without links when there is one): a link to a sibling folder adds
nothing, a loop ends, and a link out of the folder, or one whose target is missing, is a PlanError
naming it; so is a name that is no regular file (a FIFO, a device: eidos.hal.files.regular_file).
A glob is the folder before its first wildcard, walked so, keeping the paths the pattern matches
(`**` matches any number of folders).

Folder names key=value below that folder are partition columns (`hive`): their values are
URL-decoded, `__HIVE_DEFAULT_PARTITION__` and an empty value are null, and a key's type is the
first of Int64, Float64, Date (YYYY-MM-DD), String that all its values read as.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import os
import re
from urllib.parse import unquote

from eidos.errors import PlanError, shown
from eidos.hal.files import regular_file
from eidos.ir import dtypes as T

WILDCARDS = "*?["
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def expand(path: str, suffix: str | tuple[str, ...], storage: tuple = ()) -> tuple[list[str], str | None]:
    """The files `path` names (a file, a folder searched for names ending in `suffix`, or a glob), sorted,
    and the folder their partition names are read below (None for a single file). An object-store path
    (eidos.hal.stores) names objects by the same rules, a prefix standing for a folder."""
    from eidos.ir.uri import check_path

    check_path(path)
    if "://" in path:
        return _expand_store(path, suffix, storage)
    if os.path.isdir(path):
        files = walk(path, lambda rel: rel[-1].endswith(suffix), lambda rel: True)
        if not files:
            raise PlanError(f"no {'/'.join(suffix) if isinstance(suffix, tuple) else suffix} files in folder {path!r} (names starting with '.' are skipped)")
        return files, path
    if os.path.exists(path) or not any(ch in path for ch in WILDCARDS):
        if not os.path.exists(path):
            raise PlanError(f"no such file: {path!r}")
        regular_file(path)
        return [path], None
    parts = path.split(os.sep)
    fixed = next(i for i, p in enumerate(parts) if any(ch in p for ch in WILDCARDS))
    root = os.sep.join(parts[:fixed]) or ("/" if path.startswith(os.sep) else ".")
    pattern = [p for p in parts[fixed:] if p]
    if not os.path.isdir(root):
        raise PlanError(f"no such file: {path!r} (the glob matched nothing: no folder {root!r})")
    deep = "**" in pattern

    def folder_ok(rel: tuple[str, ...]) -> bool:
        return deep or (len(rel) < len(pattern) and fnmatch.fnmatchcase(rel[-1], pattern[len(rel) - 1]))

    files = walk(root, lambda rel: _matches(rel, pattern), folder_ok)
    if root == "." and not path.startswith("."):
        files = [f[2:] for f in files]      # as the user wrote the glob: 'x.parquet', not './x.parquet'
    if not files:
        raise PlanError(f"no such file: {path!r} (the glob matched nothing)")
    return files, root


def _expand_store(path: str, suffix, storage) -> tuple[list[str], str | None]:
    from eidos.hal import stores

    try:
        found = stores.kind(path, storage)
        if found == "file":
            return [path], None
        head, _, tail = path.partition("://")
        parts = tail.split("/")
        fixed = next((i for i, p in enumerate(parts) if any(ch in p for ch in WILDCARDS)), len(parts))
        root, pattern = f"{head}://{'/'.join(parts[:fixed]).rstrip('/')}", [p for p in parts[fixed:] if p]
        rels = [(f, tuple(f[len(root) + 1:].split("/"))) for f in stores.listing(root, storage)]
    except OSError as e:
        raise PlanError(f"cannot read {path!r}: {e}") from e
    files = [f for f, rel in rels if not any(c.startswith(".") for c in rel)
             and (_matches(rel, pattern) if pattern else rel[-1].endswith(suffix))]
    if not files:
        raise PlanError(f"no such file: {path!r} (nothing in the object store matched)")
    return files, root


def _matches(rel: tuple[str, ...], pattern: list[str]) -> bool:
    """Whether path components `rel` match glob components `pattern` ('**': any number of folders)."""
    if not pattern:
        return not rel
    if pattern[0] == "**":
        return any(_matches(rel[i:], pattern[1:]) for i in range(len(rel) + 1))
    return bool(rel) and fnmatch.fnmatchcase(rel[0], pattern[0]) and _matches(rel[1:], pattern[1:])


def walk(root: str, want, descend) -> list[str]:
    """Files below `root` whose components relative to it `want` accepts, descending into folders
    `descend` accepts: each file once, links followed only inside root, every loop cut (see above)."""
    top = os.path.realpath(root)
    found: dict[str, tuple[bool, str]] = {}     # real path -> (reached through a link, path)
    seen = {top}
    plain: list[tuple[str, str, tuple[str, ...], bool]] = [(root, top, (), False)]
    linked: list[tuple[str, str, tuple[str, ...], bool]] = []   # folders behind links: after all others
    while plain or linked:
        folder, real, rel, via_link = plain.pop() if plain else linked.pop(0)
        if via_link and real in seen and rel:
            continue
        seen.add(real)
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            raise PlanError(f"cannot read folder {folder!r}: {e.strerror}") from e
        for entry in entries:
            if entry.name.startswith("."):
                continue
            sub = rel + (entry.name,)
            is_link = entry.is_symlink()
            target = os.path.realpath(entry.path) if is_link else os.path.join(real, entry.name)
            is_dir = entry.is_dir()
            if is_dir and descend(sub):
                if is_link:
                    _inside(entry.path, target, top, root)
                    linked.append((entry.path, target, sub, True))
                elif target not in seen:
                    plain.append((entry.path, target, sub, via_link))
            elif not is_dir and want(sub):
                if is_link:
                    if not os.path.exists(target):
                        raise PlanError(f"{entry.path!r} is a link to {target!r}, which does not exist")
                    _inside(entry.path, target, top, root)
                regular_file(entry.path)
                through = via_link or is_link
                if target not in found or (found[target][0] and not through):
                    found[target] = (through, entry.path)
    return sorted(path for _, path in found.values())


def _inside(link: str, target: str, top: str, root: str) -> None:
    if os.path.commonpath([target, top]) != top:
        raise PlanError(f"{link!r} is a link to {target!r}, outside the folder {root!r}; eidos follows no link "
                        f"out of the folder it reads: read {target!r} on its own, or copy it into the folder")


# ---------------------------------------------------------------- hive partitions

def hive(root: str, files: list[str]) -> tuple[tuple[str, ...], list[tuple[str | None, ...]], dict[str, T.DType]]:
    """Partition keys (in path order), each file's values (decoded text, None for null) and each key's type,
    from the key=value folder names between `root` and each file."""
    keys: tuple[str, ...] | None = None
    rows = []
    for f in files:
        pairs = [c.split("=", 1) for c in os.path.relpath(os.path.dirname(f) or ".", root).split(os.sep)
                 if "=" in c and not c.startswith("=")]
        these = tuple(unquote(k) for k, _ in pairs)
        if keys is None:
            keys, first = these, f
        elif these != keys:
            raise PlanError(f"the files of {root!r} are partitioned differently: {_keys(keys)} in {first!r}, "
                            f"{_keys(these)} in {f!r}; every file must sit below the same key=value folders")
        rows.append(tuple(None if v in ("", NULL_PARTITION) else unquote(v) for _, v in pairs))
    keys = keys or ()
    if len(set(keys)) != len(keys):
        raise PlanError(f"partition key {next(k for k in keys if keys.count(k) > 1)!r} appears twice in "
                        f"the folders of {first!r}")
    return keys, rows, {k: infer_type([r[i] for r in rows]) for i, k in enumerate(keys)}


def _keys(keys: tuple[str, ...]) -> str:
    return "key=value folders " + "/".join(f"{shown(k)}=..." for k in keys) if keys else "no key=value folders"


_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def infer_type(values: list[str | None]) -> T.DType:
    """The first of Int64, Float64, Date, String that every non-null value reads as."""
    present = [v for v in values if v is not None]
    if present and all(_INT.fullmatch(v) and -2**63 <= int(v) < 2**63 for v in present):
        return T.Int64
    if present and all(_FLOAT.fullmatch(v) for v in present):
        return T.Float64
    if present and all(_DATE.fullmatch(v) and _is_date(v) for v in present):
        return T.Date
    return T.String


def _is_date(v: str) -> bool:
    try:
        _dt.date.fromisoformat(v)
    except ValueError:
        return False
    return True
