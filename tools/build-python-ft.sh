#!/usr/bin/env bash
# Builds a free-threaded CPython (./configure --disable-gil) from Debian's source package, for the
# free lane's threads (docs/free-lane.md), and makes a venv on it with eidos's core dependencies,
# the test tools, and the optional engines that run there. Re-runnable: a step already done is
# skipped, and says so.
#
#   tools/build-python-ft.sh            build and install (a few minutes on 2 cores), then the venv
#   tools/build-python-ft.sh --force    build and install again even when the interpreter is there
#
# Environment:
#   EIDOS_PYTHON_FT_PREFIX   where it installs (default /opt/python-ft); the venv is PREFIX/venv,
#                            whose python .ci/run's optional step runs the free lane's tests with
#   EIDOS_PYTHON_FT_SERIES   the CPython series to try, in order (default "3.14 3.13"): the newest
#                            version of Debian's pythonX.Y source package in unstable or testing that
#                            the mirror serves; each one it does not serve is said and skipped
#   EIDOS_PYTHON_FT_SOURCE   an upstream source tarball (Python-3.14.x.tar.xz) to build instead
#   JOBS                     make's parallelism (default 2)
#
# Only the upstream tarball of the source package is built (pythonX.Y_V.orig.tar.xz, checked
# against the signed index by apt): Debian's own patches adapt CPython to Debian's /usr layout
# (dist-packages, multiarch paths), which a private prefix does not want. The system's apt setup is
# not touched: the deb-src indexes live in a private apt state under build/python-ft/apt, on the
# Debian mirror the system's apt already uses.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=${EIDOS_PYTHON_FT_PREFIX:-/opt/python-ft}
series=${EIDOS_PYTHON_FT_SERIES:-3.14 3.13}
source_tarball=${EIDOS_PYTHON_FT_SOURCE:-}
jobs=${JOBS:-2}
force=0
for arg in "$@"; do
    case $arg in
        --force) force=1 ;;
        *) echo "build-python-ft.sh: unknown argument '$arg' (the only option is --force)" >&2; exit 2 ;;
    esac
done
work=$PWD/build/python-ft
venv=$prefix/venv
start=$SECONDS
say() { echo "build-python-ft: $*"; }

# 1. Build dependencies (Debian's -dev packages): without them configure quietly leaves out ssl
#    (pip needs it), ctypes, sqlite3, the compressors, readline; step 4 checks.
needed=(build-essential pkg-config libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libzstd-dev
        libsqlite3-dev libreadline-dev libncurses-dev uuid-dev libgdbm-dev libexpat1-dev xz-utils dpkg-dev)
missing=()
for package in "${needed[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing build dependencies: ${missing[*]}"
    apt-get install -y -q --no-install-recommends "${missing[@]}" \
        || { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; }
else
    say "build dependencies already installed"
fi

# 2. The source: a tarball given, or Debian's source package through a private apt state.
mkdir -p "$work/src"
if [ -n "$source_tarball" ]; then
    orig=$(basename "$source_tarball")
    upstream=$(echo "$orig" | grep -oE '3\.[0-9]+\.[0-9]+[a-z0-9]*' | head -n 1)
    [ -n "$upstream" ] || { say "cannot read a CPython version from the name $orig"; exit 2; }
    cp -f "$source_tarball" "$work/src/$orig"
    say "building CPython $upstream from $source_tarball (EIDOS_PYTHON_FT_SOURCE)"
else
    mirror=$(apt-get indextargets --format '$(REPO_URI)' 2>/dev/null | grep -m 1 '/debian/$' || true)
    [ -n "$mirror" ] || { say "the system's apt names no Debian mirror (apt-get indextargets)"; exit 1; }
    mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/apt/parts"
    for suite in unstable testing; do
        echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main"
    done >"$work/apt/sources.list"
    apt_private=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=$work/apt/parts"
                 -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache"
                 -o "APT::Sandbox::User=root")
    say "reading Debian unstable's and testing's source indexes (private apt state in $work/apt)"
    apt-get "${apt_private[@]}" -q update >/dev/null
    orig=
    for minor in $series; do
        package=python$minor
        # Newest first; the index can name versions the mirror does not serve (seen: every python3.14
        # source file answered 404 while its binary packages were served).
        mapfile -t versions < <(apt-cache "${apt_private[@]}" showsrc "$package" 2>/dev/null \
                                | awk '/^Version:/ {print $2}' | sort -ruV)
        [ ${#versions[@]} -gt 0 ] || { say "Debian's indexes have no source package $package"; continue; }
        for version in "${versions[@]}"; do
            name=$(apt-get "${apt_private[@]}" source --download-only --print-uris "$package=$version" 2>/dev/null \
                   | grep -oE "${package}_[0-9.]+\.orig\.tar\.xz" | head -n 1)
            if [ -n "$name" ] && [ -f "$work/src/$name" ]; then
                say "$package $version: $name already downloaded"
                orig=$name; break 2
            fi
            if (cd "$work/src" && apt-get "${apt_private[@]}" -q source --download-only "$package=$version" \
                    >/dev/null 2>"$work/apt/error"); then
                say "$package $version: downloaded $name"
                orig=$name; break 2
            fi
            say "$package $version: not served by $mirror ($(grep -m 1 -oE '[0-9]{3} +[A-Za-z ]+' "$work/apt/error" || tail -n 1 "$work/apt/error"))"
        done
    done
    [ -n "$orig" ] || { say "no version of ${series// /, } could be downloaded; EIDOS_PYTHON_FT_SOURCE takes a tarball"; exit 1; }
    upstream=${orig#*_}
    upstream=${upstream%.orig.tar.xz}
    say "building CPython $upstream from Debian's $orig"
fi
minor=$(echo "$upstream" | cut -d. -f1,2)
python=$prefix/bin/python${minor}t

# 3. Build and install, unless this prefix already holds this version without the GIL.
installed=$("$python" -c 'import sys, sysconfig; print(sys.version.split()[0], sysconfig.get_config_var("Py_GIL_DISABLED"))' \
            2>/dev/null || true)
if [ "$installed" = "$upstream 1" ] && [ "$force" -eq 0 ]; then
    say "$python is CPython $upstream without the GIL already (--force builds it again)"
else
    tree=$work/Python-$upstream
    rm -rf "$tree"
    mkdir -p "$tree"
    say "unpacking $orig into $tree"
    tar -xf "$work/src/$orig" -C "$tree" --strip-components=1
    say "configure --disable-gil --prefix=$prefix (log: $work/configure.log)"
    (cd "$tree" && ./configure --disable-gil --prefix="$prefix" >"$work/configure.log" 2>&1) \
        || { tail -n 30 "$work/configure.log"; exit 1; }
    say "make -j$jobs (log: $work/make.log)"
    built=$SECONDS
    (cd "$tree" && make -j"$jobs" >"$work/make.log" 2>&1) || { tail -n 30 "$work/make.log"; exit 1; }
    say "built in $((SECONDS - built)) s; installing into $prefix"
    (cd "$tree" && make install >"$work/install.log" 2>&1) || { tail -n 30 "$work/install.log"; exit 1; }
    rm -rf "$venv"  # a venv made on an earlier build points at an interpreter that is gone
fi

# 4. Check what was built: no GIL, and the modules pip and eidos need.
"$python" - <<'EOF'
import importlib.util, sys, sysconfig
assert sysconfig.get_config_var("Py_GIL_DISABLED") == 1, "built with the GIL"
assert not sys._is_gil_enabled(), "the GIL is enabled at start"
lacking = [m for m in ("ssl", "zlib", "ctypes", "sqlite3", "bz2", "lzma", "readline", "uuid")
           if importlib.util.find_spec(m) is None]
assert not lacking, f"built without {', '.join(lacking)} (a missing -dev package)"
print(f"build-python-ft: {sys.executable}: CPython {sys.version.split()[0]}, GIL disabled")
EOF

# 5. The venv: eidos's core dependencies and the test tools (read from pyproject.toml, so the lists
#    cannot drift), setuptools for an editable install without network, then each optional engine
#    that has a wheel for this interpreter and imports without turning the GIL back on.
if [ ! -x "$venv/bin/python" ]; then
    say "making the venv $venv"
    "$python" -m venv "$venv"
fi
requirements() {  # pyproject.toml's requirements: the core's, or each named extra's or package's
    "$venv/bin/python" - "$@" <<'EOF'
import re, sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
found = project["dependencies"] if len(sys.argv) == 1 else [
    r for name in sys.argv[1:]
    for r in extras.get(name, []) + [r for group in extras.values() for r in group
                                     if re.split(r"[<>=!~\[ ]", r)[0] == name]]
print("\n".join(dict.fromkeys(r for r in found if not r.startswith("eidos["))))
EOF
}
pip() {  # this machine's pip configuration may name local indexes that are absent: not news here
    "$venv/bin/python" -m pip "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
mapfile -t core < <(requirements; requirements pytest hypothesis; echo "setuptools>=69")
say "installing into the venv: ${core[*]}"
pip install -q --upgrade pip
pip install -q --only-binary=:all: "${core[@]}"
mapfile -t engines < <(requirements polars sql cpu ray)
for spec in "${engines[@]}"; do
    name=$(echo "$spec" | grep -oE '^[A-Za-z0-9_.-]+')
    module=${name//-/_}
    if ! pip install -q --only-binary=:all: "$spec" >"$work/pip-$name.log" 2>&1; then
        say "$name: not installed: no wheel for this interpreter ($(grep -m 1 -E '^ERROR' "$work/pip-$name.log" | cut -c 1-160))"
        continue
    fi
    verdict=$("$venv/bin/python" -c "import sys, $module; print('GIL re-enabled' if sys._is_gil_enabled() else 'ok')" 2>&1 \
              | tail -n 1)
    if [ "$verdict" = ok ]; then
        say "$name: installed; imports with the GIL still disabled"
    else
        say "$name: uninstalled again, import gives: $verdict"
        pip uninstall -q -y "$name"
    fi
done
say "done in $((SECONDS - start)) s: $venv/bin/python (.ci/run's optional step runs the free lane's tests with it)"
