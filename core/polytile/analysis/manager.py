"""Analyses, the manager that caches them, and what a pass preserves of them.

An analysis computes facts about an op (a module, a function) once; the
:class:`AnalysisManager` caches it until a pass returns :class:`PreservedAnalyses` that
do not keep it.  Analyses sit below passes: a pass asks ``context.analyses.get(...)``.
"""

from __future__ import annotations

from typing import Any, Iterable


class PreservedAnalyses:
    """Which cached analyses stay valid after a pass."""

    __slots__ = ("_all", "_kept")

    def __init__(self, keep_all: bool = False, kept: Iterable[type] = ()):
        self._all = keep_all
        self._kept = frozenset(kept)

    @classmethod
    def all(cls) -> "PreservedAnalyses":
        """The pass changed nothing an analysis could see."""
        return cls(True)

    @classmethod
    def none(cls) -> "PreservedAnalyses":
        return cls(False)

    @classmethod
    def only(cls, *analyses: type) -> "PreservedAnalyses":
        return cls(False, analyses)

    def preserves(self, analysis: type) -> bool:
        return self._all or analysis in self._kept

    @property
    def preserves_all(self) -> bool:
        return self._all


class Analysis:
    """Base of cached analyses: ``__init__(self, op, analyses)`` computes the result.

    ``analyses`` is the :class:`AnalysisManager`, so one analysis can build on another.
    """

    def __init__(self, op: Any, analyses: "AnalysisManager"):
        self.op = op


class AnalysisManager:
    """Computes analyses on demand and caches them until a pass invalidates them."""

    def __init__(self) -> None:
        self._cache: dict[tuple[type, int], Any] = {}
        self.computed = 0  # how many analyses were actually computed (tests, statistics)

    def get(self, analysis: type, op: Any) -> Any:
        key = (analysis, id(op))
        cached = self._cache.get(key)
        if cached is not None and cached.op is op:
            return cached
        result = analysis(op, self)
        self.computed += 1
        self._cache[key] = result
        return result

    def cached(self, analysis: type, op: Any) -> Any | None:
        found = self._cache.get((analysis, id(op)))
        return found if found is not None and found.op is op else None

    def invalidate(self, preserved: PreservedAnalyses) -> None:
        if preserved.preserves_all:
            return
        self._cache = {k: v for k, v in self._cache.items() if preserved.preserves(k[0])}

    def clear(self) -> None:
        self._cache.clear()


__all__ = ["Analysis", "AnalysisManager", "PreservedAnalyses"]
