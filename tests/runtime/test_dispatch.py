"""Plans for a native dispatcher (polytile.runtime.dispatch): what each argument must be."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import polytile as pt
import polytile.language as pl
from polytile.backend import LaunchParam
from polytile.runtime.dispatch import SlotCheck, plan_call

DType = type("dtype", (), {})
FLOAT32 = DType()
Tensor = type("Tensor", (), {"__module__": "torch", "__init__": lambda self, address: setattr(self, "a", address),
                             "data_ptr": lambda self: self.a, "dtype": FLOAT32})


@pt.jit(do_not_specialize=["m"])
def kernel(x, y, n, m, flag, scale=1.5, count=7, BLOCK: pl.constexpr = 64):
    pass


def _compiled(*names):
    return SimpleNamespace(params=tuple(LaunchParam(name, None) for name in names), grid_defaults={"num_warps": 4},
                           guard=None)


def test_each_value_gets_the_check_that_decides_its_key():
    compiled = _compiled("x", "n", "m", "flag", "scale", "count")
    x = Tensor(0x1000)
    plan = plan_call(kernel, compiled, (x, None, 32, 33, True), {"scale": 0.5, "BLOCK": 128, "num_warps": 8})
    assert plan.nargs == 5 and plan.kwnames == ("scale", "BLOCK", "num_warps")
    assert plan.slots == [
        SlotCheck("tensor", (Tensor, FLOAT32), hint="aligned", parameter=0),
        SlotCheck("none"),  # a None argument is compiled in
        SlotCheck("int", hint="divisible", range="i32", parameter=1),
        SlotCheck("int", hint="any", range="i32", parameter=2),  # do_not_specialize
        SlotCheck("bool", parameter=3),
        SlotCheck("float", parameter=4),
        SlotCheck("equal", 128),
        SlotCheck("equal", 8),
    ]
    assert plan.slot_names == ("x", "y", "n", "m", "flag", "scale", "BLOCK", "num_warps")
    assert plan.defaults == {5: 7}  # count, not passed, is packed from its default
    assert plan.meta_base == {"num_warps": 8, "count": 7}


@pytest.mark.parametrize("n, hint, range_", [(1, "one", "i32"), (17, "other", "i32"), (0, "divisible", "i32"),
                                             (-16, "divisible", "i32"), (2**31, "divisible", "i64"),
                                             (-(2**31) - 1, "other", "i64"), (2**63, "divisible", "u64")])
def test_ints_are_planned_by_range_and_hint_as_the_python_path_keys_them(n, hint, range_):
    plan = plan_call(kernel, _compiled("x", "n", "m", "flag", "scale", "count"), (Tensor(0x1004), None, n, 3, False),
                     None)
    assert plan.slots[0].hint == "unaligned"
    assert plan.slots[2] == SlotCheck("int", hint=hint, range=range_, parameter=1)


@pytest.mark.parametrize("args", [
    pytest.param((object(), None, 1, 2, True), id="an-object-no-check-decides"),
    pytest.param((Tensor(0), None, 2**64, 2, True), id="an-int-beyond-64-bits"),
    pytest.param((Tensor(0), None, 1, 2, True, 1.0, 1, pl.constexpr(64)), id="a-constexpr-wrapper"),
    pytest.param((Tensor(0), None, 1, 2, True, 1.0, 1, [64]), id="a-list-constexpr"),
])
def test_values_no_check_can_decide_are_not_planned(args):
    assert plan_call(kernel, _compiled("x", "n", "m", "flag", "scale", "count"), args, None) is None


def test_a_keyword_given_twice_or_too_many_arguments_are_not_planned():
    compiled = _compiled("x", "n", "m", "flag")
    assert plan_call(kernel, compiled, (Tensor(0), None, 1), {"n": 2}) is None
    assert plan_call(kernel, compiled, (Tensor(0),) * 9, None) is None


@pytest.mark.parametrize("dispatches, planned", [(True, True), (False, False)])
def test_a_kernel_with_global_scratch_is_planned_only_for_a_launcher_that_allocates_it(dispatches, planned):
    compiled = _compiled("x", "n", "m", "flag", "scale", "count")
    compiled.global_scratch = 384
    compiled.backend_launcher = SimpleNamespace(dispatches_global_scratch=dispatches)
    plan = plan_call(kernel, compiled, (Tensor(0x1000), None, 1, 2, True), None)
    assert (plan is not None) == planned
