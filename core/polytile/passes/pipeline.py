"""Pipelines: named stages of passes, a text form, and anchors for plugins.

Text form (round-trips through :func:`parse_pipeline` / ``str``)::

    canonicalize,cse,my-pass{threshold=4 mode=fast}          a flat list of passes
    tile(inline,canonicalize,cse),llvm(lower-to-llvm)        stages, each a list

Anchors are the names plugins use to place their passes: a stage name ("tile") means
the start (``insert_before``) or end (``insert_after``) of that stage; a pass name
("cse") means that pass.  A pass name that occurs more than once means its first
occurrence in pipeline order: the core's tile stage comes first, so ``cse`` is the tile
stage's CSE on every backend, however many times a backend's later stages run CSE again
(an anchor must not change meaning with the target).  ``cse#2`` names the second
occurrence, and any pass can be qualified by its stage: ``distribute/cse`` (the first
``cse`` of that stage), ``tile/canonicalize#2`` (the second of that stage).

A pipeline also remembers which plugin put each pass in it (:meth:`Pipeline.attribute`),
so that the pass manager can name the plugin of a pass that fails or breaks the IR.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..errors import ConfigError, UnknownNameError
from .pass_base import Pass

_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


@dataclass
class Stage:
    """A named list of passes (``tile``, ``distribute``, ``llvm``...)."""

    name: str
    passes: list[Pass] = field(default_factory=list)

    def spelling(self) -> str:
        return f"{self.name}({','.join(p.spelling() for p in self.passes)})"


#: The stage name used when pipeline text has no stages.
DEFAULT_STAGE = "main"


class Pipeline:
    """An ordered list of stages; see the module docstring for anchors."""

    def __init__(self, stages: list[Stage] | None = None):
        self.stages: list[Stage] = stages or []
        #: id(pass) -> (pass, who put it here): kept with the pass so the id stays its own.
        self._contributors: dict[int, tuple[Pass, Any]] = {}

    # -- who put each pass here ----------------------------------------------------------
    def attribute(self, pass_: Pass, owner: Any) -> None:
        """Record that ``owner`` (a :class:`~polytile.plugins.registry.PluginInfo`) put
        ``pass_`` (this very instance) into the pipeline."""
        self._contributors[id(pass_)] = (pass_, owner)

    def contributor(self, pass_: Pass) -> Any:
        """Who put ``pass_`` here (:meth:`attribute`), or None when nobody said."""
        entry = self._contributors.get(id(pass_))
        return entry[1] if entry is not None and entry[0] is pass_ else None

    def snapshot(self) -> list[tuple[Stage, list[Pass]]]:
        """The stages and their passes as they are now, for :meth:`restore`."""
        return [(stage, list(stage.passes)) for stage in self.stages]

    def restore(self, snapshot: list[tuple[Stage, list[Pass]]]) -> None:
        """Undo every change made since ``snapshot`` was taken (a plugin's hook that
        raised half way through its edits)."""
        self.stages[:] = [stage for stage, _ in snapshot]
        for stage, passes in snapshot:
            stage.passes[:] = passes

    @staticmethod
    def added_since(snapshot: list[tuple[Stage, list[Pass]]], pipeline: "Pipeline") -> list[Pass]:
        """The pass instances in ``pipeline`` that ``snapshot`` did not hold."""
        before = {id(p) for _, passes in snapshot for p in passes}
        return [p for _, p in pipeline.passes() if id(p) not in before]

    # -- building ---------------------------------------------------------------------
    def add_stage(self, name: str, passes: list[Pass] = ()) -> Stage:
        if any(s.name == name for s in self.stages):
            raise ConfigError(f"the pipeline already has a stage named '{name}'")
        stage = Stage(name, list(passes))
        self.stages.append(stage)
        return stage

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise UnknownNameError("pipeline stage", name, [s.name for s in self.stages])

    def passes(self) -> Iterator[tuple[Stage, Pass]]:
        for stage in self.stages:
            for pass_ in stage.passes:
                yield stage, pass_

    def anchors(self) -> list[str]:
        """Every anchor name this pipeline accepts."""
        names = [s.name for s in self.stages]
        counts: dict[str, int] = {}
        for stage, pass_ in self.passes():
            counts[pass_.name] = counts.get(pass_.name, 0) + 1
            names.append(f"{stage.name}/{pass_.name}")
            names.append(pass_.name if counts[pass_.name] == 1 else f"{pass_.name}#{counts[pass_.name]}")
        return names

    # -- anchors ----------------------------------------------------------------------
    def _find(self, anchor: str) -> tuple[Stage, int | None]:
        """The stage and pass index an anchor names (index None: the stage itself)."""
        stage_name, _, rest = anchor.rpartition("/")
        name, _, occurrence_text = rest.partition("#")
        if not stage_name and not occurrence_text and any(s.name == name for s in self.stages):
            return self.stage(name), None
        occurrence = 1
        if occurrence_text:
            if not occurrence_text.isdigit() or int(occurrence_text) < 1:
                raise ConfigError(f"anchor '{anchor}': after '#' comes the occurrence, 1 or more")
            occurrence = int(occurrence_text)
        matches = [(stage, i) for stage in self.stages for i, p in enumerate(stage.passes)
                   if p.name == name and (not stage_name or stage.name == stage_name)]
        if not matches:
            raise UnknownNameError("pipeline anchor", anchor, self.anchors())
        # Without '#n' a name means its first occurrence (see the module docstring).
        if occurrence > len(matches):
            raise ConfigError(f"anchor '{anchor}': the pass occurs only {len(matches)} times")
        return matches[occurrence - 1]

    @staticmethod
    def _check_passes(passes: tuple) -> list[Pass]:
        for item in passes:
            if not isinstance(item, Pass):
                hint = " (make it with the pass class, e.g. MyPass(), or pass_registry().create(name))" \
                    if isinstance(item, (str, type)) else ""
                raise TypeError(f"pipelines hold Pass instances, got {type(item).__name__} {item!r}{hint}")
        return list(passes)

    def insert_before(self, anchor: str, *passes: Pass) -> None:
        stage, index = self._find(anchor)
        position = 0 if index is None else index
        stage.passes[position:position] = self._check_passes(passes)

    def insert_after(self, anchor: str, *passes: Pass) -> None:
        stage, index = self._find(anchor)
        position = len(stage.passes) if index is None else index + 1
        stage.passes[position:position] = self._check_passes(passes)

    def replace(self, anchor: str, *passes: Pass) -> None:
        stage, index = self._find(anchor)
        if index is None:
            stage.passes[:] = self._check_passes(passes)
        else:
            stage.passes[index:index + 1] = self._check_passes(passes)

    def remove(self, anchor: str) -> None:
        self.replace(anchor)

    # -- text -------------------------------------------------------------------------
    def __str__(self) -> str:
        if len(self.stages) == 1 and self.stages[0].name == DEFAULT_STAGE:
            return ",".join(p.spelling() for p in self.stages[0].passes)
        return ",".join(s.spelling() for s in self.stages)

    def __repr__(self) -> str:
        return f"Pipeline({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pipeline) and str(self) == str(other)


class _PipelineParser:
    def __init__(self, text: str, make_pass: Callable[[str, dict[str, str], str], Pass]):
        self.text = text
        self.pos = 0
        self.make_pass = make_pass

    def error(self, message: str) -> None:
        caret = " " * self.pos + "^"
        raise ConfigError(f"pipeline text, column {self.pos + 1}: {message}\n  {self.text}\n  {caret}")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self, char: str) -> bool:
        self.skip()
        return self.text.startswith(char, self.pos)

    def name(self) -> str:
        self.skip()
        m = _NAME.match(self.text, self.pos)
        if not m:
            found = self.text[self.pos:self.pos + 10] or "the end"
            self.error(f"expected a pass or stage name (kebab-case), found '{found}'")
        self.pos = m.end()
        return m.group(0)

    def options(self) -> dict[str, str]:
        # {key=value key2=value2}; values run to the next space or '}'.
        options: dict[str, str] = {}
        self.pos += 1
        while True:
            self.skip()
            if self.peek("}"):
                self.pos += 1
                return options
            m = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)=([^\s}]*)").match(self.text, self.pos)
            if not m:
                self.error("expected an option like 'name=value' or '}'")
            if m.group(1) in options:
                self.error(f"option '{m.group(1)}' is given twice")
            options[m.group(1)] = m.group(2)
            self.pos = m.end()

    def pass_item(self) -> Pass:
        start = self.pos
        name = self.name()
        options = self.options() if self.peek("{") else {}
        return self.make_pass(name, options, f"in pipeline text at column {start + 1}")

    def pipeline(self) -> Pipeline:
        pipeline = Pipeline()
        flat: list[Pass] = []
        self.skip()
        if self.pos >= len(self.text):
            return Pipeline([Stage(DEFAULT_STAGE, [])])
        while True:
            save = self.pos
            name = self.name()
            if self.peek("("):
                if flat:
                    self.error("mix of stages and bare passes; put every pass inside a stage")
                self.pos += 1
                stage = pipeline.add_stage(name)
                if not self.peek(")"):
                    while True:
                        stage.passes.append(self.pass_item())
                        if self.peek(","):
                            self.pos += 1
                            continue
                        break
                if not self.peek(")"):
                    self.error(f"expected ',' or ')' to close stage '{name}'")
                self.pos += 1
            else:
                if pipeline.stages:
                    self.error("mix of stages and bare passes; put every pass inside a stage")
                self.pos = save
                flat.append(self.pass_item())
            self.skip()
            if self.pos >= len(self.text):
                break
            if not self.peek(","):
                self.error("expected ',' between passes")
            self.pos += 1
        if flat:
            pipeline.stages.append(Stage(DEFAULT_STAGE, flat))
        return pipeline


def parse_pipeline(text: str, make_pass: Callable[[str, dict[str, str], str], Pass] | None = None) -> Pipeline:
    """Parse pipeline text.  ``make_pass(name, options, where)`` builds each pass; by
    default it looks the name up in the registered passes (listing close matches)."""
    if make_pass is None:
        from .registry import pass_registry

        make_pass = pass_registry().create
    return _PipelineParser(text, make_pass).pipeline()
