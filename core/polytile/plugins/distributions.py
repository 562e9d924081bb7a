"""Installed distributions and their entry points, read from ``*.dist-info`` folders.

This is what ``importlib.metadata.entry_points()`` and ``importlib.metadata.version()``
answer, for the two questions polytile asks on every fresh process: which plugins are
installed (to find the backend of the target) and which versions (for the compile cache
key).  ``importlib.metadata`` takes 30 to 60 ms to import (it pulls in ``email``,
``zipfile``, ``csv``...), more than a launch from a warm disk cache may cost in all;
reading the few small files ourselves takes a millisecond or two.

The rules are importlib.metadata's: the folders of every ``sys.path`` directory, in
order; a distribution found twice (under two spellings of its name, say) counts once,
the first found, by the name its folder gives (``<name>-<version>.dist-info``); name
and version come from the ``METADATA`` (``PKG-INFO``) headers, read when asked for.
The scan is kept per process and made again when ``sys.path`` or the modification time
of one of its directories changes (a ``pip install`` during a test session).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
from typing import Any, NamedTuple

_METADATA_FOLDER_SUFFIXES = (".dist-info", ".egg-info")
#: importlib.metadata's pattern of an entry point's value: ``module:attr.attr [extras]``.
_ENTRY_POINT_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


def normalize(name: str) -> str:
    """A distribution name as pip compares it: ``"Polytile_AMD"`` is ``"polytile-amd"``."""
    return re.sub(r"[-_.]+", "-", name).lower()


class Distribution:
    """One installed distribution.  Its name, version and entry points are read from the
    folder's files on first use: of the hundreds of distributions in a large environment,
    a fresh process reads the metadata of the few with polytile entry points, not all."""

    __slots__ = ("path", "key", "_headers", "_entry_points")

    def __init__(self, path: str, key: str):
        #: The ``*.dist-info`` (or ``*.egg-info``) folder.
        self.path = path
        #: The normalized name, from the folder's name (what importlib.metadata dedupes by).
        self.key = key
        self._headers: dict[str, str] | None = None
        self._entry_points: dict[str, list[tuple[str, str]]] | None = None

    def _header(self, name: str) -> str:
        if self._headers is None:
            self._headers = _headers(os.path.join(self.path, "METADATA")) or \
                _headers(os.path.join(self.path, "PKG-INFO"))
        return self._headers.get(name, "")

    @property
    def name(self) -> str:
        return self._header("Name")

    @property
    def version(self) -> str:
        return self._header("Version")

    @property
    def entry_point_table(self) -> dict[str, list[tuple[str, str]]]:
        """``{group: [(name, value), ...]}`` from ``entry_points.txt``."""
        if self._entry_points is None:
            self._entry_points = _entry_point_table(os.path.join(self.path, "entry_points.txt"))
        return self._entry_points

    def __repr__(self) -> str:
        return f"Distribution(name={self.name!r}, version={self.version!r}, path={self.path!r})"


class EntryPoint(NamedTuple):
    """One entry point, with what the plugin manager uses of ``importlib.metadata.EntryPoint``."""

    name: str
    value: str
    group: str
    dist: Distribution

    def load(self) -> Any:
        """Import the module the value names and return the attribute it names (or the module)."""
        match = _ENTRY_POINT_VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point '{self.name}' of distribution '{self.dist.name}' has the value "
                             f"{self.value!r}, which is not 'module' or 'module:attribute'")
        loaded = importlib.import_module(match.group("module"))
        for attribute in filter(None, (match.group("attr") or "").split(".")):
            loaded = getattr(loaded, attribute)
        return loaded


_lock = threading.Lock()
_scanned: tuple[tuple, list[Distribution]] | None = None


def distributions() -> list[Distribution]:
    """Every installed distribution, first found first, each name once."""
    global _scanned
    stamp = _sys_path_stamp()
    scanned = _scanned
    if scanned is not None and scanned[0] == stamp:
        return scanned[1]
    with _lock:
        found: list[Distribution] = []
        seen: set[str] = set()
        for directory, _ in stamp:
            for dist in _distributions_in(directory):
                if dist.key not in seen:
                    seen.add(dist.key)
                    found.append(dist)
        _scanned = (stamp, found)
    return found


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` of every installed distribution."""
    return [EntryPoint(name, value, group, dist)
            for dist in distributions() for name, value in dist.entry_point_table.get(group, ())]


def version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None when it is not installed."""
    wanted = normalize(name)
    return next((d.version for d in distributions() if d.key == wanted), None)


def installed_versions(*names: str) -> dict[str, str]:
    """``{name: version}`` of the installed distributions among ``names`` (for cache keys)."""
    found = {name: version(name) for name in names}
    return {name: v for name, v in found.items() if v is not None}


def _sys_path_stamp() -> tuple:
    stamp = []
    for entry in sys.path:
        directory = entry or os.getcwd()
        try:
            stamp.append((directory, os.stat(directory).st_mtime_ns))
        except OSError:
            continue
    return tuple(stamp)


def _distributions_in(directory: str) -> list[Distribution]:
    try:
        with os.scandir(directory) as entries:
            folders = sorted(e.path for e in entries if e.name.endswith(_METADATA_FOLDER_SUFFIXES) and e.is_dir())
    except OSError:  # a zip file on sys.path, a directory we may not read
        return []
    found = []
    for folder in folders:
        # "<name>-<version>.dist-info", the name's own dashes escaped as underscores; an
        # egg-info folder may have no version ("<name>.egg-info").
        stem = os.path.basename(folder).rsplit(".", 1)[0]
        dist = Distribution(folder, normalize(stem.split("-", 1)[0]))
        if dist.key:
            found.append(dist)
    return found


def _headers(path: str) -> dict[str, str]:
    """The first ``Name`` and ``Version`` headers of a metadata file (RFC 822 style)."""
    headers: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    break  # the headers end at the first blank line; the description follows
                key, sep, value = line.partition(":")
                if sep and key in ("Name", "Version") and key not in headers:
                    headers[key] = value.strip()
                    if len(headers) == 2:
                        break
    except OSError:
        pass
    return headers


def _entry_point_table(path: str) -> dict[str, list[tuple[str, str]]]:
    table: dict[str, list[tuple[str, str]]] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return table
    section: list[tuple[str, str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = table.setdefault(line[1:-1].strip(), [])
        elif section is not None:
            name, sep, value = line.partition("=")
            if sep:
                section.append((name.strip(), value.strip()))
    return table


def discover_entry_points(groups: tuple[str, ...]) -> list[EntryPoint]:
    """The entry points of ``groups``, group by group, in a deterministic order.

    Sorted by name within a group so that the target chosen on a machine with two kinds
    of device does not depend on the order of ``sys.path``; an entry point seen twice
    (one distribution under two spellings of its name) counts once.
    """
    found: list[EntryPoint] = []
    seen: set[tuple[str, str, str, str]] = set()
    for group in groups:
        for ep in sorted(entry_points(group), key=lambda ep: (ep.name, ep.dist.name)):
            key = (group, ep.name, ep.value, normalize(ep.dist.name))
            if key not in seen:
                seen.add(key)
                found.append(ep)
    return found
