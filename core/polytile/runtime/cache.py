"""The on-disk cache of compiled kernels.

An entry is a directory ``<cache_dir>/kernels/<key[:2]>/<key>/`` holding

* ``kernel.ir``: the IR after the pipeline (the interpreter's "binary" is IR text; a GPU
  backend keeps it too, for ``asm()`` and debugging),
* one file per binary artifact a backend produces (``<name>.bin``: cubin, hsaco, ...),
* ``metadata.json``, written last: the key, the target, the versions that made it, the
  kernel's name and parameters, the backend's metadata, the SHA-256 of every other file,
  and its own checksum (:mod:`.cache_files`).

The key (:func:`kernel_cache_key`) is the SHA-256 of everything the compiled code depends
on: the source of the kernel and of every ``@jit`` function it may call (transitively),
the compile-time globals they read, the specialization, the options, the target, the
versions of polytile, of every plugin and of each backend toolchain.

Nothing in an entry is trusted.  Every file is written to a temporary file in the same
directory and renamed over the old one (``os.replace`` is atomic), so a reader sees a
whole old file or a whole new one.  A reader checks the metadata's own checksum, the
type and shape of each of its fields, its key, target and version, and the checksum of
every file.  An entry that fails a check (truncated, a flipped bit, a directory where a
file should be, written by another polytile) is removed and compiled again, with one
:class:`CacheWarning` naming the kernel, the entry and what was wrong; so is an entry the
JIT cannot make a kernel from.  An entry with no ``metadata.json`` (a writer killed half
way) is a plain miss.  Files are not fsync'ed: a crash that leaves one empty or torn
gives a failed checksum, and fsync cost a cold compile several milliseconds.

Files and directories are created as ``open()`` and ``mkdir`` create them, so the umask
decides who else may read them (a team sharing one cache directory: docs/runtime.md).

Compiling takes a lock per key (:mod:`.cache_lock`): of several processes that miss the
same entry at once, one compiles it and the others wait, then read it.
"""

from __future__ import annotations

import ast
import hashlib
import os
import types as _types
from pathlib import Path
from typing import Any, Callable, TypeVar

from .cache_files import FORMAT, IR, METADATA, EntryProblem, check_directory, make_directories, metadata_bytes, \
    parse_metadata, read_checked, read_file, remove_path, write_atomic

__all__ = ["FORMAT", "CacheEntry", "CacheWarning", "EntryProblem", "KernelCache", "cache_directory", "cache_enabled",
           "kernel_cache_key"]

_T = TypeVar("_T")


class CacheWarning(UserWarning):
    """A damaged cache entry was replaced, or a lock waited for too long: the kernel
    still runs, compiled again."""


class CacheEntry:
    """A compiled kernel read back from the cache (or about to be written to it)."""

    def __init__(self, key: str, target: str, name: str, ir: str, binaries: dict[str, bytes] | None = None,
                 metadata: dict[str, Any] | None = None):
        self.key = key
        self.target = target
        self.name = name
        self.ir = ir
        #: Backend artifacts by name (``{"cubin": b"..."}``); the interpreter has none.
        self.binaries: dict[str, bytes] = {} if binaries is None else binaries
        #: Anything else the launcher needs (parameters, the hints the kernel was built with).
        self.metadata: dict[str, Any] = {} if metadata is None else metadata

    def __repr__(self) -> str:
        return f"CacheEntry(key={self.key!r}, target={self.target!r}, name={self.name!r}, binaries={sorted(self.binaries)})"


def cache_enabled() -> bool:
    from .. import config

    return bool(config.get("cache"))


def cache_directory() -> Path:
    from .. import config

    return Path(config.get("cache_dir"))


def lock_timeout() -> float:
    from .. import config

    return float(config.get("cache_lock_timeout"))


class KernelCache:
    """Entries under ``directory/kernels``, their locks under ``directory/locks``; see the
    module docstring."""

    def __init__(self, directory: "str | Path"):
        self.directory = Path(directory)
        self.root = self.directory / "kernels"
        self.locks = self.directory / "locks"

    def path(self, key: str) -> Path:
        return self.root / key[:2] / key

    def lock_path(self, key: str) -> Path:
        return self.locks / key[:2] / f"{key}.lock"

    def fetch(self, key: str, target: str, *, kernel: str, use: Callable[[CacheEntry], _T],
              build: Callable[[], tuple[_T, CacheEntry | None]], timeout: float | None = None) -> _T:
        """``use(entry)`` of the entry for ``key``; where there is none, or it is damaged,
        ``build()`` (which returns the result and the entry to store) under the key's lock.

        ``use`` raises :class:`EntryProblem` (or any other exception) when it cannot make
        anything of an entry that passed the checks: that entry is damaged too.  The first
        look takes no lock (a warm start pays nothing for locking); a miss or a problem
        takes it and looks again, since the process that held it may just have written
        the entry.  Only then, with no writer at work, is a damaged entry reported (one
        :class:`CacheWarning`) and removed.  ``timeout``: how long to wait for the lock
        (default: the setting ``cache_lock_timeout``)."""
        try:
            entry = self.read(key, target)
            if entry is not None:
                return _use(use, entry)
        except EntryProblem:
            pass  # looked at again under the lock, where no writer is half way through
        from .cache_lock import KeyLock

        with KeyLock(self.lock_path(key), lock_timeout() if timeout is None else timeout, kernel):
            try:
                entry = self.read(key, target)
                if entry is not None:
                    return _use(use, entry)
            except EntryProblem as problem:
                if not self._usable():
                    warn(f"kernel '{kernel}': the cache directory {self.directory} (setting cache_dir) is not a "
                         "directory; the kernel is compiled and not cached")
                    return build()[0]
                failure = self.discard(key)
                if failure is None:
                    warn(f"kernel '{kernel}': the on-disk cache entry {self.path(key)} is damaged ({problem}); "
                         "it was removed and the kernel is compiled again")
                else:
                    # Another user's entry that this one may not read or replace (a
                    # shared cache and a umask of 077, say): compiled, not cached.
                    warn(f"kernel '{kernel}': the on-disk cache entry {self.path(key)} cannot be used ({problem}) "
                         f"and cannot be removed ({failure}); the kernel is compiled and not cached")
                    return build()[0]
            result, new_entry = build()
            if new_entry is not None:
                self.store(new_entry)
            return result

    def _usable(self) -> bool:
        """False when ``cache_dir`` (or a folder above it) is a file: a user's mistake to
        report, never something to delete."""
        return not any(os.path.lexists(p) and not os.path.isdir(p) for p in (self.directory, *self.directory.parents))

    def load(self, key: str, target: str) -> CacheEntry | None:
        """The entry for ``key``, or None if there is none or it fails any check."""
        try:
            return self.read(key, target)
        except EntryProblem:
            return None

    def read(self, key: str, target: str) -> CacheEntry | None:
        """The entry for ``key``; None if there is none (or no ``metadata.json``: it was
        never finished); raises :class:`EntryProblem` if it fails any check."""
        from .. import __version__

        entry_dir = self.path(key)
        if not check_directory(entry_dir):
            return None
        raw = read_file(entry_dir / METADATA)
        if raw is None:
            return None
        metadata = parse_metadata(raw, key, target, __version__)
        files = metadata["files"]
        try:
            ir = read_checked(entry_dir / IR, files[IR]).decode("utf-8")
        except UnicodeDecodeError:
            raise EntryProblem(f"{IR} is not UTF-8 text") from None
        binaries = {name: read_checked(entry_dir / f"{name}.bin", files[f"{name}.bin"])
                    for name in metadata["binaries"]}
        return CacheEntry(key, target, metadata["name"], ir, binaries, metadata["extra"])

    def store(self, entry: CacheEntry) -> bool:
        """Write ``entry`` atomically; whether it was written.  A failure to write (a
        read-only disk) only loses the entry; so does an entry that would not pass the
        checks of :meth:`read` (it would be compiled again at every load, never used)."""
        from .. import __version__

        entry_dir = self.path(entry.key)
        data = {name: bytes(value) for name, value in entry.binaries.items()}
        fields = {
            "format": FORMAT, "key": entry.key, "target": entry.target, "polytile": __version__,
            "name": entry.name, "binaries": sorted(data), "extra": entry.metadata,
            "files": {IR: hashlib.sha256(entry.ir.encode("utf-8")).hexdigest(),
                      **{f"{name}.bin": hashlib.sha256(value).hexdigest() for name, value in data.items()}},
        }
        text = metadata_bytes(fields)
        try:
            parse_metadata(text, entry.key, entry.target, __version__)
        except EntryProblem:
            return False
        try:
            make_directories(entry_dir, owned=self.root)
            write_atomic(entry_dir / IR, entry.ir.encode("utf-8"))
            for name, value in sorted(data.items()):
                write_atomic(entry_dir / f"{name}.bin", value)
            # Last: an entry without metadata (a writer killed half way) is simply a miss.
            write_atomic(entry_dir / METADATA, text)
        except OSError:
            return False
        return True

    def discard(self, key: str) -> str | None:
        """Remove the entry for ``key``, whatever is at its path; None, or why it could not."""
        path = self.path(key)
        try:
            for folder in (self.root, path.parent):  # a file where a folder of the cache belongs
                if os.path.lexists(folder) and not os.path.isdir(folder):
                    remove_path(folder)
            remove_path(path)
        except OSError as error:
            return error.strerror or str(error)
        if os.path.lexists(path):
            return "permission denied"
        return None

    def clear(self) -> None:
        """Remove every entry and lock file (what ``rm -rf <cache_dir>/kernels <cache_dir>/locks`` does)."""
        import shutil

        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.locks, ignore_errors=True)


def warn(message: str) -> None:
    """A :class:`CacheWarning`, shown at the first line outside polytile (the launch)."""
    import warnings

    from ..errors import user_stack_level

    warnings.warn(message, CacheWarning, stacklevel=user_stack_level())


def _use(use: Callable[[CacheEntry], _T], entry: CacheEntry) -> _T:
    try:
        return use(entry)
    except EntryProblem:
        raise
    except Exception as error:  # an entry that checks but cannot be loaded: damaged too
        raise EntryProblem(f"loading it failed: {type(error).__name__}: {error}") from error


# --------------------------------------------------------------------------------------
# The key


def kernel_cache_key(jit_fn: Any, specialization: Any, options: dict, target: str,
                     components: list[str]) -> str:
    """The SHA-256 (hex) naming one compiled specialization of ``jit_fn``."""
    from .. import __version__

    hasher = hashlib.sha256()

    def add(*parts: Any) -> None:
        for part in parts:
            hasher.update(str(part).encode("utf-8"))
            hasher.update(b"\0")

    add("polytile", __version__, "format", FORMAT, polytile_source_hash())
    add("kernel", jit_fn.source().source_text)  # which of the dependencies is the entry point
    add("dependencies", dependency_hash(jit_fn))
    add("specialization", _stable(specialization))
    add("options", _stable(sorted(options.items())))
    add("target", target)
    for component in components:
        add("component", component)
    return hasher.hexdigest()


_SOURCE_HASH: str | None = None


def polytile_source_hash() -> str:
    """The hash of polytile's own Python files, once per process.  The version number
    alone is not enough: a change to a pass or to the frontend between releases (in a
    development checkout) changes the compiled code without changing the version.

    Each file counts by its path, size and modification time, as Python's own bytecode
    cache judges a source file: reading and hashing every file cost a launch from a
    warm disk cache several milliseconds, and an edit always moves the time."""
    global _SOURCE_HASH
    if _SOURCE_HASH is None:
        _SOURCE_HASH = source_tree_hash(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return _SOURCE_HASH


def source_tree_hash(root: str) -> str:
    """The hash of the path, size and modification time of every ``.py`` file under ``root``."""
    hasher = hashlib.sha256()
    _hash_tree(hasher, root, "")
    return hasher.hexdigest()


def _hash_tree(hasher: Any, directory: str, relative: str) -> None:
    # os.walk's order (a directory's files, then each subdirectory in turn, sorted), with
    # os.scandir and string joins instead of os.walk and os.path.relpath: half the time,
    # and this runs in every process that compiles or loads a kernel.
    try:
        with os.scandir(directory) as entries:
            entries = sorted(entries, key=lambda e: e.name)
    except OSError:
        return
    subdirectories = []
    for entry in entries:
        try:
            if entry.is_dir():
                if entry.name != "__pycache__" and not entry.is_symlink():  # os.walk does not follow them
                    subdirectories.append(entry)
            elif entry.name.endswith(".py"):
                info = entry.stat()
                hasher.update(f"{relative}{entry.name}\0{info.st_size}\0{info.st_mtime_ns}\1".encode())
        except OSError:
            continue
    for entry in subdirectories:
        _hash_tree(hasher, entry.path, f"{relative}{entry.name}/")


def dependency_hash(jit_fn: Any) -> str:
    """The hash of the source of ``jit_fn`` and every ``@jit`` function it may call, and
    the current values of the compile-time globals they read."""
    # Each function is its source, its noinline flag and its globals' values; not its
    # module's name, which the compiled code does not depend on (the same file imported
    # under two names is the same kernel).  Sorted, so the order of discovery is no matter.
    parts = []
    for fn in jit_dependencies(jit_fn):
        text = f"{fn.noinline}\0{fn.source().source_text}"
        for name, value in sorted(constant_globals(fn).items()):
            text += f"\0{name}={type(value).__name__}:{value!r}"
        parts.append(hashlib.sha256(text.encode("utf-8")).hexdigest())
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()


def _stable(value: Any) -> str:
    """A text for the key that does not change between processes: a @jit function passed
    as a constexpr stands for its sources, not for its address."""
    if getattr(value, "__polytile_jit__", False):
        return f"jit({dependency_hash(value)})"
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_stable(v) for v in value) + ")"
    return repr(value)


def jit_dependencies(jit_fn: Any) -> list[Any]:
    """``jit_fn`` and every ``@jit`` function its body names, transitively.

    Found by reading the source: a name or an ``a.b.c`` attribute chain that resolves
    (through the closure and the globals, then attribute by attribute) to a ``@jit``
    function.  A superset of what a compilation calls (a helper named only in a dead
    static branch counts too), which is what a cache key needs.
    """
    seen: dict[int, Any] = {}
    stack = [jit_fn]
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen[id(fn)] = fn
        for value in _referenced_values(fn).values():
            if getattr(value, "__polytile_jit__", False) and id(value) not in seen:
                stack.append(value)
    return list(seen.values())


def constant_globals(jit_fn: Any) -> dict[str, Any]:
    """The compile-time globals (``constexpr``, numbers, strings, tuples of them) that
    ``jit_fn``'s body names, with their current values."""
    from ..language import core as lc

    constants = {}
    for name, value in _referenced_values(jit_fn).items():
        if isinstance(value, lc.constexpr):
            value = value.value
        if _is_constant(value):
            constants[name] = value
    return constants


def _is_constant(value: Any) -> bool:
    # The one rule for what a kernel may fold from a global (the frontend refuses the rest).
    from ..frontend.globals import is_keyed_constant

    return is_keyed_constant(value)


def _referenced_values(jit_fn: Any) -> dict[str, Any]:
    """What each global or closure name (or attribute chain) in the body refers to now."""
    fn = jit_fn.fn
    scope = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                scope[name] = cell.cell_contents
            except ValueError:  # a cell not filled yet
                pass
    found: dict[str, Any] = {}
    for chain in _body_chains(jit_fn.source()):
        if chain[0] not in scope:
            continue
        value = scope[chain[0]]
        found[chain[0]] = value
        for depth, attr in enumerate(chain[1:], start=2):
            if isinstance(value, _types.ModuleType):
                value = _module_attribute(value, attr)
            elif getattr(value, "__polytile_jit__", False) or isinstance(value, type):
                value = getattr(value, attr, None)
            else:
                break
            if value is None:
                break
            found[".".join(chain[:depth])] = value
    return found


#: The attribute chains of each function body, by its source text: the AST walk is the
#: costly part of a cache key and depends on the text alone (the values the chains name
#: are read again every time, since globals change).
_CHAINS: dict[str, tuple[tuple[str, ...], ...]] = {}


def _body_chains(source: Any) -> tuple[tuple[str, ...], ...]:
    """Each name or ``a.b.c`` chain in the body that is not a parameter, once, in walk order."""
    chains = _CHAINS.get(source.source_text)
    if chains is None:
        tree = source.tree
        local = {a.arg for a in tree.args.args + tree.args.kwonlyargs}
        unique: dict[tuple[str, ...], None] = {}
        for node in ast.walk(tree):
            chain = _attribute_chain(node)
            if chain and chain[0] not in local:
                unique[tuple(chain)] = None
        chains = _CHAINS[source.source_text] = tuple(unique)
    return chains


def _module_attribute(module: Any, name: str) -> Any:
    """``module.name``, or None.  A name that polytile's own modules provide on first use
    (PEP 562: the language's builtins, the runtime's helpers) is not looked up: doing so
    imported the whole frontend (``pl.load`` -> polytile.language.standard -> the
    dialects) on every launch from a warm disk cache, and such a name is never a ``@jit``
    function or a compile-time constant, so it adds nothing to the key (polytile's
    sources are in the key anyway: :func:`polytile_source_hash`)."""
    try:
        return module.__dict__[name]
    except KeyError:
        pass
    if module.__name__ == "polytile" or module.__name__.startswith("polytile."):
        return None
    return getattr(module, name, None)


def _attribute_chain(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def global_snapshot(jit_fn: Any) -> list[tuple[Any, str, Any]]:
    """``(function, name, value)`` for every compile-time global that ``jit_fn`` or a
    ``@jit`` function it may call reads (``SCALE``, ``helpers.SCALE``).  A compiled kernel
    keeps it so that a launch notices a changed global in any module, not only in the
    kernel's own (:func:`snapshot_is_current`)."""
    return [(fn, name, value) for fn in jit_dependencies(jit_fn) for name, value in constant_globals(fn).items()]


def snapshot_is_current(snapshot: list[tuple[Any, str, Any]]) -> bool:
    from ..language import core as lc

    for fn, name, value in snapshot:
        current = lc.unwrap(_resolve(fn, name))
        if type(current) is not type(value) or current != value:
            return False
    return True


_MISSING = object()


def _resolve(jit_fn: Any, dotted: str) -> Any:
    """The current value of a global or closure name, or an attribute chain from one."""
    fn = jit_fn.fn
    head, *rest = dotted.split(".")
    value = fn.__globals__.get(head, _MISSING)
    if fn.__closure__ and head in fn.__code__.co_freevars:
        try:
            value = fn.__closure__[fn.__code__.co_freevars.index(head)].cell_contents
        except ValueError:
            value = _MISSING
    for attr in rest:
        if value is _MISSING:
            break
        value = getattr(value, attr, _MISSING)
    return value


def globals_guard(snapshot: list[tuple[Any, str, Any]]) -> Any:
    """A function telling, cheaply, whether ``snapshot`` (:func:`global_snapshot`) still
    holds; None when it is empty.

    A launch calls it every time, so it compares *identities*: it reads each global (or
    closure cell, or ``module.NAME`` chain) and checks that it is the very object it was
    when the kernel was compiled.  Only when one is not does it compare values
    (:func:`snapshot_is_current`); equal values under new objects (``SCALE = 2`` run
    again) are then remembered, and the kernel is kept."""
    if not snapshot:
        return None
    namespace: dict[str, Any] = {"_slow": None}
    reads = []
    for index, (jit_fn, dotted, _) in enumerate(snapshot):
        fn = jit_fn.fn
        head, *rest = dotted.split(".")
        if fn.__closure__ and head in fn.__code__.co_freevars:
            namespace[f"_s{index}"] = fn.__closure__[fn.__code__.co_freevars.index(head)]
            read = f"_s{index}.cell_contents"
        else:
            namespace[f"_s{index}"] = fn.__globals__
            read = f"_s{index}[{head!r}]"
        reads.append(read + "".join(f".{attr}" for attr in rest))
    source = (
        "def read():\n"
        f"    return ({', '.join(reads)},)\n"
        "def guard():\n"
        "    try:\n"
        f"        if {' and '.join(f'{read} is _seen[{i}]' for i, read in enumerate(reads))}:\n"
        "            return True\n"
        "    except Exception:\n"
        "        return False\n"
        "    return _slow()\n"
    )
    exec(compile(source, "<polytile globals guard>", "exec"), namespace)  # noqa: S102 - our own source
    read = namespace["read"]

    def slow() -> bool:
        if not snapshot_is_current(snapshot):
            return False
        try:
            namespace["_seen"] = read()
        except Exception:
            return False
        return True

    namespace["_slow"] = slow
    namespace["_seen"] = tuple(object() for _ in reads)  # matches nothing until slow() has checked
    slow()
    return namespace["guard"]
