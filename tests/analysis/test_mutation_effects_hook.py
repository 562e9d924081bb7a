"""``register_mutation_effects``, the hook a plugin uses to tell the mutation analysis what
its ops write, shown with a small plugin's ops of its own (not TMA's): an op of no
registered effects may write through every pointer it takes; one with effects writes
exactly what they say, also through addresses it records in memory and reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from polytile.analysis.mutation import MUTATION_EFFECTS, mutation_report
from polytile.ir import parse_module
from polytile.ir import types as t
from polytile.ir.constraints import TypeConstraint
from polytile.ir.opdef import Operand, WritesMemory, define_op
from polytile.ir.operation import Operation
from polytile.plugins.registry import PluginInfo
from polytile.ir_testing import dedent

Pointer = TypeConstraint("a pointer scalar", lambda x: isinstance(x, t.PointerType))
DEMO = PluginInfo(name="mutation-demo", distribution="mutation-demo")


@define_op
class CopyOp(Operation):
    """Copies ``count`` elements from ``src`` to ``dst`` (a plugin's bulk copy, say)."""

    name = "mutdemo.copy"
    dst = Operand(Pointer)
    src = Operand(Pointer)
    traits = (WritesMemory,)


@define_op
class RememberOp(Operation):
    """Stores the address ``pointer`` at ``slot`` (a plugin's handle in a workspace)."""

    name = "mutdemo.remember"
    slot = Operand(Pointer)
    pointer = Operand(Pointer)
    traits = (WritesMemory,)


@define_op
class FillRecordedOp(Operation):
    """Fills the array whose address is stored at ``slot``."""

    name = "mutdemo.fill_recorded"
    slot = Operand(Pointer)
    traits = (WritesMemory,)


def _doc_example() -> str:
    """The registrations docs/plugins.md shows (the section on register_mutation_effects)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text()
    section = text.split("### What a plugin's ops write: `register_mutation_effects`", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.fixture
def effects():
    """The demo plugin's effects, registered by the docs' example as a plugin registers
    them (owned), and taken away after the test as the plugin manager withdraws a
    plugin's entries."""
    namespace = {"CopyOp": CopyOp, "RememberOp": RememberOp, "FillRecordedOp": FillRecordedOp}
    with MUTATION_EFFECTS.owned_by(DEMO):
        exec(compile(_doc_example(), "docs/plugins.md", "exec"), namespace)  # noqa: S102
    assert {MUTATION_EFFECTS.owner_of(cls) for cls in (CopyOp, RememberOp, FillRecordedOp)} == {DEMO}
    yield
    MUTATION_EFFECTS.remove_owned_by(DEMO)


KERNEL = """
func.func @k(%a: ptr<f32>, %b: ptr<f32>, %c: ptr<f32>, %ws: ptr<i64>) attributes {kernel = true} {
  mutdemo.copy %a, %b
  mutdemo.remember %ws, %c
  mutdemo.fill_recorded %ws
  func.return
}
"""


def test_ops_of_no_registered_effects_may_write_every_pointer_they_take():
    report = mutation_report(parse_module(dedent(KERNEL)))
    assert report.written == ["a", "b", "c", "ws"]


def test_registered_effects_say_exactly_what_is_written(effects):
    report = mutation_report(parse_module(dedent(KERNEL)))
    # b is only read; c is written through the address recorded at ws, and ws itself.
    assert report.written == ["a", "c", "ws"]
    assert any("recorded at 'ws'" in reason and "('c')" in reason for reason in report.reasons), report.reasons
