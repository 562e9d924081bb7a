"""Artifacts made when they are read, not by the pass that offers them.

Some artifacts cost a compile more than the code it runs needs: AMDGCN assembly text is a
second run of LLVM's code generation (llvmlite's ``emit_assembly`` and ``emit_object``
each run it), and only an IR dump, an ahead-of-time compile or a reader of
``CompileResult.artifacts`` looks at it; a kernel launched from the JIT never does.  Such
a pass stores a :class:`DeferredArtifact` under the artifact's key.  Whatever reads the
artifacts as files or values (:func:`resolve_artifact`, the IR printer and the stage
recorder of :mod:`.instrumentation`, :class:`ArtifactsView`, which
``CompileResult.artifacts`` is) makes it then, once, and puts the value in its place.
Anything that keeps artifacts by type (``CompileResult.binaries`` keeps bytes, the compile
metadata JSON values) never makes it: a deferred artifact is neither.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Callable, Iterator


class DeferredArtifact:
    """An artifact ``make()`` gives when it is first read: text (``text=True``, the
    default) or bytes.  The pass that stores it keeps what ``make`` needs alive."""

    __slots__ = ("_make", "text", "value")

    def __init__(self, make: Callable[[], "str | bytes"], *, text: bool = True):
        self._make: Callable[[], str | bytes] | None = make
        self.text = text
        #: The value, once made (None before).
        self.value: str | bytes | None = None

    def resolve(self) -> "str | bytes":
        if self._make is not None:
            value = self._make()
            if not isinstance(value, str if self.text else bytes):
                raise TypeError(f"a deferred {'text' if self.text else 'bytes'} artifact was made as "
                                f"{type(value).__name__}")
            self.value, self._make = value, None
        assert self.value is not None
        return self.value

    def __repr__(self) -> str:
        state = "made" if self._make is None else "not made yet"
        return f"<DeferredArtifact ({'text' if self.text else 'bytes'}, {state})>"


def resolve_artifact(artifacts: "MutableMapping[str, Any]", key: str) -> Any:
    """``artifacts[key]``, made first (and stored in its place) if it is deferred."""
    value = artifacts[key]
    if isinstance(value, DeferredArtifact):
        value = artifacts[key] = value.resolve()
    return value


def same_artifact(old: Any, new: Any) -> bool:
    """Whether ``new`` is ``old``, or the value ``old`` (deferred) was made into."""
    return old is new or (isinstance(old, DeferredArtifact) and old.value is not None and old.value is new)


class ArtifactsView(MutableMapping):
    """The artifacts of a compile (a dict), each deferred one made when it is read."""

    __slots__ = ("_artifacts",)

    def __init__(self, artifacts: "dict[str, Any]"):
        self._artifacts = artifacts

    def __getitem__(self, key: str) -> Any:
        return resolve_artifact(self._artifacts, key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._artifacts[key] = value

    def __delitem__(self, key: str) -> None:
        del self._artifacts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._artifacts))

    def __len__(self) -> int:
        return len(self._artifacts)

    def __contains__(self, key: object) -> bool:
        return key in self._artifacts

    def __repr__(self) -> str:
        return f"ArtifactsView({self._artifacts!r})"


__all__ = ["ArtifactsView", "DeferredArtifact", "resolve_artifact", "same_artifact"]
