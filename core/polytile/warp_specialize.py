"""``pl.range(..., warp_specialize=True)`` where no plugin specialises loops.

Splitting a loop into producer and consumer warp groups is the optional plugin
polytile-warpspec's work (docs/plugins.md).  Where that plugin is not loaded (not
installed, disabled by ``disabled_plugins``, or failed), a loop with the hint runs
unspecialised on every target, with the same results.  This module says so where a
user looks:

- the compiled kernel's metadata (``polytile compile``'s ``KERNEL.json``,
  ``kernel.metadata``) gets ``warp_specialize``: one entry per loop with the hint, in
  source order, ``{"loop": "file:line", "specialised": false, "why": "...",
  "plugin_missing": true}``;
- the first launch in the process of a kernel with such a loop warns once
  (:class:`WarpSpecializationNote`) naming the plugin, compiled or read from the disk
  cache alike.

Where the plugin is loaded, it reports its loops itself under the same key (with
``specialised`` true, or false and why: a target without the hardware, a loop it cannot
split), through the metadata hook, and this module stays out of its way.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, Iterable, Mapping

#: The compile metadata key (and the loop hint's name in ``pl.range``).
WARP_SPECIALIZE = "warp_specialize"
#: The ``scf.for`` attribute the frontend sets from ``pl.range(..., warp_specialize=True)``.
HINT = "pt.warp_specialize"
#: The distribution that specialises such loops.
PLUGIN = "polytile-warpspec"


class WarpSpecializationNote(UserWarning):
    """A loop asks for warp specialization and runs unspecialised: the plugin that
    specialises loops is not loaded (see the message for why and how to get it)."""


def plugin_unavailable() -> str | None:
    """Why polytile-warpspec cannot specialise loops in this process (not installed,
    disabled, failed), or None when it is loaded."""
    from .plugins.manager import get_plugin_manager
    from .plugins.records import FAILED, LOADED

    wanted = PLUGIN.replace("_", "-").lower()
    for record in get_plugin_manager().plugins():
        names = {str(record.info.name).replace("_", "-").lower(),
                 str(record.info.distribution or "").replace("_", "-").lower()}
        if wanted in names:
            if record.status == LOADED:
                return None
            state = "failed to load" if record.status == FAILED else f"is {record.status}"
            return f"{PLUGIN} {state}" + (f" ({record.reason})" if record.reason else "")
    return f"{PLUGIN} is not installed"


def hinted_loops(module: Any) -> list[Any]:
    """The ``scf.for`` ops of ``module`` with the hint, in program order."""
    return [op for op in module.walk() if op.name == "scf.for" and op.attributes.get(HINT)]


def record_unspecialised(loops: Iterable[Any], artifacts: dict) -> None:
    """Put the ``warp_specialize`` entries of ``loops`` (unspecialised: the plugin is not
    loaded) into a compile's ``artifacts``, unless a plugin reported them already."""
    loops = list(loops)
    if not loops or WARP_SPECIALIZE in artifacts:
        return
    why = plugin_unavailable()
    if why is None:
        return  # the plugin reports its loops itself
    artifacts[WARP_SPECIALIZE] = [
        {"loop": str(op.location) if op.location is not None else "?", "specialised": False,
         "why": why, "plugin_missing": True}
        for op in loops]


_noted = False
_lock = threading.Lock()


def note_unspecialised(kernel: str, metadata: Mapping[str, Any] | None) -> None:
    """Warn once per process when ``metadata`` (a compiled kernel's) says a loop asked
    for warp specialization and the plugin was not there to do it."""
    global _noted
    entries = [e for e in (metadata or {}).get(WARP_SPECIALIZE) or () if isinstance(e, Mapping)]
    missing = [e for e in entries if e.get("plugin_missing")]
    if not missing or _noted:
        return
    with _lock:
        if _noted:
            return
        _noted = True
    first = missing[0]
    warnings.warn(f"kernel '{kernel}': pl.range(..., warp_specialize=True) at {first.get('loop')} runs unspecialised: "
                  f"{first.get('why')}. Splitting loops into warp groups is the work of the plugin {PLUGIN}; "
                  "results are the same without it. This note is shown once per process.",
                  WarpSpecializationNote, stacklevel=3)


def _forget_note() -> None:
    """Show the note again (tests)."""
    global _noted
    _noted = False


__all__ = ["HINT", "PLUGIN", "WARP_SPECIALIZE", "WarpSpecializationNote", "hinted_loops", "note_unspecialised",
           "plugin_unavailable", "record_unspecialised"]
