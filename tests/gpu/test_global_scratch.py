"""Global scratch (polytile.gpu.global_scratch): how a kernel's ops that registered some
are placed in each program's slice, and what the compile's metadata says."""

from __future__ import annotations

import pytest

from polytile.gpu.global_scratch import (ALIGNMENT_KEY, BYTES_KEY, GLOBAL_SCRATCH, USERS_KEY, GlobalScratchPlan,
                                         plan_global_scratch)
from polytile.plugins.registry import PluginInfo

OWNER = PluginInfo("scratch-test", "polytile-scratch-test", "1.0")


class Location:
    def __init__(self, line):
        self.line = line


class MapOp:
    name = "test.map"

    def __init__(self, size, alignment, line, purpose=None):
        self.size, self.alignment, self.location, self.attributes = size, alignment, Location(line), {}
        if purpose is not None:
            self.purpose = purpose


class OtherOp:
    name = "test.other"
    attributes: dict = {}
    location = None


class Function:
    def __init__(self, *ops):
        self.ops = ops

    def walk(self):
        return iter(self.ops)


@pytest.fixture
def registered():
    GLOBAL_SCRATCH.add(MapOp, lambda op, target: (op.size, op.alignment), owner=OWNER)
    yield
    GLOBAL_SCRATCH.remove_owned_by(OWNER)


def test_each_op_gets_the_next_aligned_offset_and_the_slice_rounds_to_the_largest_alignment(registered):
    a, b, c = MapOp(100, 16, 3, "a map"), MapOp(128, 128, 4, "a map"), MapOp(8, 8, 9)
    plan = plan_global_scratch(Function(a, OtherOp(), b, c), target=None)
    assert [plan.offsets[op] for op in (a, b, c)] == [0, 128, 256]
    assert (plan.bytes, plan.alignment) == (384, 128)
    # What needs it, as the launch names it: the purpose (else the op's name) and the line.
    assert plan.users == ["a map (line 3)", "a map (line 4)", "test.map (line 9)"]
    assert plan.metadata() == {BYTES_KEY: 384, ALIGNMENT_KEY: 128, USERS_KEY: plan.users}


def test_ops_that_need_none_and_kernels_without_such_ops_get_no_scratch(registered):
    plan = plan_global_scratch(Function(MapOp(0, 128, 1), OtherOp()), target=None)
    assert plan.bytes == 0 and plan.offsets == {} and plan.metadata() == {}


def test_an_alignment_that_is_not_a_power_of_two_is_refused(registered):
    with pytest.raises(ValueError, match="power of two, got 48"):
        plan_global_scratch(Function(MapOp(64, 48, 1)), target=None)


def test_a_plugin_registration_leaves_with_the_plugin(registered):
    assert plan_global_scratch(Function(MapOp(64, 64, 1)), target=None).bytes == 64
    GLOBAL_SCRATCH.remove_owned_by(OWNER)
    assert GLOBAL_SCRATCH.get(MapOp) is None
    assert plan_global_scratch(Function(MapOp(64, 64, 1)), target=None) == GlobalScratchPlan()
