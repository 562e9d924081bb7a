"""The files of one on-disk cache entry: how they are written, read and checked.

Used by :mod:`polytile.runtime.cache`; nothing here knows about kernels.

* A file is written to a temporary file next to it and renamed into place, so a reader
  sees a whole old file or a whole new one.  The temporary file is created with mode
  ``0o666`` and the process's umask applies (as it does to ``open()``), so a cache
  directory shared by a team (umask 002, a setgid group directory) gives files that
  the whole group can read and replace; :func:`tempfile.mkstemp` made them ``0600``.
* ``metadata.json`` carries the SHA-256 of every other file of the entry and its own
  checksum (field ``"checksum"``: the SHA-256 of the canonical JSON text of every other
  field), and every field has a fixed type and shape that :func:`check_metadata`
  verifies.  A flipped bit anywhere in an entry is found, never launched.
* A path that should be a file or a directory but is something else (a directory where
  ``metadata.json`` should be, a file where the entry's directory should be) is reported
  as what it is, and :func:`remove_path` clears it so the entry can be written again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

#: The layout of an entry.  Bumped when it changes: it is part of the key too, so an
#: entry of another layout is never looked at.  2: ``metadata.json`` has its own checksum.
FORMAT = 2

METADATA = "metadata.json"
IR = "kernel.ir"

_HEX64 = re.compile(r"[0-9a-f]{64}")
#: A binary's name becomes a file name (``<name>.bin``): nothing that could leave the entry.
_BINARY_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
_HINTS = ("", "D", "1")
_TOP_LEVEL = {"format": int, "key": str, "target": str, "polytile": str, "name": str, "files": dict,
              "binaries": list, "extra": dict, "checksum": str}


class EntryProblem(Exception):
    """What is wrong with an entry, in words a user can act on (``str(problem)``)."""


# --------------------------------------------------------------------------------------
# Metadata: written with a checksum, read back only if every field checks


def metadata_bytes(fields: dict[str, Any]) -> bytes:
    """The text of ``metadata.json`` for ``fields`` (everything but ``"checksum"``)."""
    document = dict(fields, checksum=_checksum(fields))
    return json.dumps(document, indent=1, sort_keys=True).encode("utf-8")


def _checksum(fields: dict[str, Any]) -> str:
    # Over a canonical text, not the file's bytes: the file stays readable (indented)
    # and a change that JSON reads as the same value (none is one bit away) is harmless.
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def parse_metadata(data: bytes, key: str, target: str, version: str) -> dict[str, Any]:
    """The fields of ``metadata.json`` (bytes ``data``) of the entry ``key`` for ``target``;
    raises :class:`EntryProblem` saying what is wrong unless every field checks."""
    try:
        document = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except UnicodeDecodeError:
        raise EntryProblem(f"{METADATA} is not UTF-8 text") from None
    except ValueError as error:
        raise EntryProblem(f"{METADATA} is not valid JSON ({error})") from None
    except RecursionError:
        raise EntryProblem(f"{METADATA} nests deeper than any metadata does") from None
    if not isinstance(document, dict):
        raise EntryProblem(f"{METADATA} holds {_json_type(document)}, not an object")
    check_metadata(document, key, target, version)
    return document


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of ``json.loads``; a key given twice is an error (JSON would keep the last)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"the key {key!r} appears twice")
        result[key] = value
    return result


def check_metadata(document: dict[str, Any], key: str, target: str, version: str) -> None:
    """Check every field of a parsed ``metadata.json``: the checksum first, then each
    field's type and shape, then that it belongs to ``key``, ``target`` and ``version``."""
    for field, kind in _TOP_LEVEL.items():
        if field not in document:
            raise EntryProblem(f"{METADATA} has no field '{field}'")
        value = document[field]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise EntryProblem(f"{METADATA} field '{field}' is {_json_type(value)}, not {_json_type(kind())}")
    unknown = sorted(set(document) - set(_TOP_LEVEL))
    if unknown:
        raise EntryProblem(f"{METADATA} has unknown field '{unknown[0]}'")
    fields = {k: v for k, v in document.items() if k != "checksum"}
    if document["checksum"] != _checksum(fields):
        raise EntryProblem(f"the checksum of {METADATA} does not match its contents")
    # A matching checksum says the file is as written; the rest says it was written by
    # this polytile, for this key and target, in this layout (a hand-copied entry, or a
    # checksum recomputed by a tool, is still held to it).
    if document["format"] != FORMAT:
        raise EntryProblem(f"{METADATA} has format {document['format']}, not {FORMAT}")
    if document["key"] != key:
        raise EntryProblem(f"{METADATA} names key {document['key'][:16]}..., not this entry's")
    if document["polytile"] != version:
        raise EntryProblem(f"{METADATA} was written by polytile {document['polytile']}, not {version}")
    if document["target"] != target:
        # The target is in the key already; checking it again means that a key
        # collision or a hand-copied entry never runs code built for another architecture.
        raise EntryProblem(f"the entry was compiled for target '{document['target']}', not '{target}'")
    if not document["name"].isidentifier():
        raise EntryProblem(f"{METADATA} field 'name' is {document['name']!r}, not a function name")
    binaries = document["binaries"]
    for name in binaries:
        if not isinstance(name, str) or not _BINARY_NAME.fullmatch(name):
            raise EntryProblem(f"{METADATA} field 'binaries' lists {name!r}, not a binary's name")
    if len(set(binaries)) != len(binaries) or binaries != sorted(binaries):
        raise EntryProblem(f"{METADATA} field 'binaries' is not a sorted list of distinct names")
    expected = {IR, *(f"{name}.bin" for name in binaries)}
    files = document["files"]
    if set(files) != expected:
        raise EntryProblem(f"{METADATA} field 'files' lists {sorted(files)}, not {sorted(expected)}")
    for name, digest in files.items():
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise EntryProblem(f"{METADATA} gives {name!r} the checksum {digest!r}, not a SHA-256")
    _check_extra(document["extra"])


def _check_extra(extra: dict[str, Any]) -> None:
    """What the JIT keeps besides the binaries: its parameters, their hints, and the
    backend's metadata (a JSON object handed to its launcher).  Other keys are free."""
    params = extra.get("params", [])
    if not isinstance(params, list) or not all(isinstance(p, str) and p.isidentifier() for p in params):
        raise EntryProblem(f"{METADATA} field 'extra.params' is not a list of parameter names")
    if "hints" in extra:
        hints = extra["hints"]
        if not isinstance(hints, list) or len(hints) != len(params) or not all(h in _HINTS for h in hints):
            raise EntryProblem(f"{METADATA} field 'extra.hints' is not one of '', 'D', '1' per parameter")
    if "kernel" in extra and not isinstance(extra["kernel"], dict):
        raise EntryProblem(f"{METADATA} field 'extra.kernel' is {_json_type(extra['kernel'])}, not an object")


def _json_type(value: Any) -> str:
    """``value``'s JSON type with its article: "an object", "a string"."""
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "an array", str: "a string", int: "an integer", float: "a number",
            type(None): "null"}.get(type(value), f"a {type(value).__name__}")


# --------------------------------------------------------------------------------------
# Reading


def read_file(path: Path, what: str | None = None) -> bytes | None:
    """The bytes of the regular file ``path``; None if nothing is there; raises
    :class:`EntryProblem` if something else is (a directory, a FIFO, unreadable)."""
    what = what or path.name
    try:
        # O_NONBLOCK: a FIFO put where a file should be must not hang the launch.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise EntryProblem(f"{what} is a directory, not a file") from None
    except OSError as error:
        raise EntryProblem(f"{what} cannot be opened ({error.strerror or error})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise EntryProblem(f"{what} is {_kind_of(info.st_mode)}, not a file")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as error:
        raise EntryProblem(f"{what} cannot be read ({error.strerror or error})") from None
    finally:
        os.close(fd)


def read_checked(path: Path, expected: str) -> bytes:
    """The bytes of ``path``, whose SHA-256 must be ``expected``."""
    data = read_file(path)
    if data is None:
        raise EntryProblem(f"{path.name} is missing")
    if hashlib.sha256(data).hexdigest() != expected:
        raise EntryProblem(f"the checksum of {path.name} does not match (corrupt or changed on disk)")
    return data


def check_directory(path: Path) -> bool:
    """True if ``path`` is a directory, False if nothing is there; raises
    :class:`EntryProblem` if something else is."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        raise EntryProblem(f"a parent of {path} is not a directory") from None
    except OSError as error:
        raise EntryProblem(f"{path} cannot be examined ({error.strerror or error})") from None
    if not stat.S_ISDIR(info.st_mode):
        raise EntryProblem(f"the entry's path is {_kind_of(info.st_mode)}, not a directory")
    return True


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device or other special file"


# --------------------------------------------------------------------------------------
# Writing


def write_atomic(path: Path, data: bytes) -> str:
    """Write ``data`` to ``path`` so that no reader ever sees part of it; its SHA-256.
    A directory or other non-file at ``path`` is removed first (``os.replace`` cannot
    replace a directory)."""
    temp = _create_temporary(path)
    try:
        fd = temp[0]
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if os.path.isdir(path) and not os.path.islink(path):
            remove_path(path)  # rename() replaces a file, a link or a FIFO, never a directory
        os.replace(temp[1], path)
    except BaseException:
        try:
            os.unlink(temp[1])
        except OSError:
            pass
        raise
    return hashlib.sha256(data).hexdigest()


def _create_temporary(path: Path) -> tuple[int, str]:
    """A new file next to ``path``, open for writing: mode 0o666 less the umask, as
    ``open()`` makes files (and a default ACL of the directory applies)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        temp = os.path.join(path.parent, f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(temp, flags, 0o666), temp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name next to {path}")


def make_directories(path: Path, owned: Path) -> None:
    """Create ``path`` and its parents (mode 0o777 less the umask, as ``mkdir`` does).
    Under ``owned`` (the cache's own tree, ``owned`` included), a file or other
    non-directory found where a directory should be is removed first; above it, nothing
    is removed (``cache_dir`` naming a user's file is an error, not something to delete)."""
    chain = [path, *path.parents]
    mine = [p for p in chain if p == owned or owned in p.parents]
    for directory in reversed(mine):
        if os.path.lexists(directory) and not os.path.isdir(directory):
            remove_path(directory)  # a file, a FIFO or a dangling link where a directory belongs
    path.mkdir(parents=True, exist_ok=True)


def remove_path(path: Path) -> None:
    """Remove whatever is at ``path`` (a file, a link, a directory tree); nothing if absent."""
    import shutil  # only a damaged entry is removed: a launch from the cache never needs it

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        shutil.rmtree(path)
