"""Triton's ``tl.extra.cuda``: ``libdevice`` (the same functions as ``pl.extra.libdevice``,
which every target lowers), the launch's warps and threads, the clock and the SM id, and
the names plugins register under ``extra.cuda``.

Every target runs them: ``globaltimer()`` is ``%globaltimer`` on NVIDIA (nanoseconds),
AMD's real-time counter in nanoseconds, and the interpreter's virtual clock (0, 1, 2...
per program); ``smid()`` is ``%smid``, the AMD compute unit's hardware id, 0 on the
interpreter; ``num_threads()`` counts the target's threads per warp (64 on CDNA)."""

from __future__ import annotations

from typing import Any

from ...core import builtin, constexpr, current_context, semantic_error, tensor
from ...extensions import namespace_attribute, namespace_names


def _launch(name: str) -> Any:
    launch = getattr(current_context(), "launch", None)
    if launch is None:
        raise semantic_error(f"pl.extra.cuda.{name}() is a fact of the launch (its num_warps), which this compile "
                             "does not know: launch the kernel, or pass num_warps to lower()/warmup()")
    return launch


@builtin
def num_warps() -> constexpr:
    """The launch's ``num_warps``, a compile-time value (Triton's ``tl.extra.cuda.num_warps``)."""
    return constexpr(_launch("num_warps").num_warps)


@builtin
def num_threads() -> constexpr:
    """Threads per program: ``num_warps`` times the target's threads per warp, a
    compile-time value (Triton's ``tl.extra.cuda.num_threads``, which assumes 32)."""
    launch = _launch("num_threads")
    return constexpr(launch.num_warps * launch.warp_size)


@builtin
def globaltimer() -> tensor:
    """A reading (int64) of the device's nanosecond clock, which every SM shares
    (``%globaltimer``); the interpreter's virtual clock there.  Never moved or merged."""
    from ....dialects.tile_clock import ReadClockOp
    from ... import semantic as sem

    return tensor(sem.emit(ReadClockOp, clock="global").result)


@builtin
def smid() -> tensor:
    """The (int32) id of the SM (AMD: compute unit) running this program; 0 on the interpreter."""
    from ....dialects.tile_clock import ProcessorIdOp
    from ... import semantic as sem

    return tensor(sem.emit(ProcessorIdOp).result)


def __getattr__(name: str) -> Any:
    return namespace_attribute(__name__, "extra.cuda", name)


def __dir__() -> list[str]:
    return sorted({"libdevice", "globaltimer", "num_threads", "num_warps", "smid", *namespace_names("extra.cuda")})
