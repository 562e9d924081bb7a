"""The ops of polytile.dialects.gpu (layout conversions) and the layouts as attributes."""

from __future__ import annotations

import numpy as np
import pytest

from polytile.dialects.gpu import ConvertLayoutOp
from polytile.ir.opdef import Pure

from ._util import assert_roundtrip, assert_verify_error, func

BLOCKED_1 = "#gpu.blocked<size_per_thread = [1], threads_per_warp = [32], warps_per_cta = [2], order = [0]>"
BLOCKED_2 = "#gpu.blocked<size_per_thread = [2], threads_per_warp = [32], warps_per_cta = [1], order = [0]>"

ROUNDTRIP = {
    "convert_layout": func(
        f"%a: tile<64xi32, {BLOCKED_1}>",
        f"%0 = gpu.convert_layout %a : tile<64xi32, {BLOCKED_2}>",
        f"%1 = gpu.convert_layout %0 : tile<64xi32, {BLOCKED_1}>",
        "func.return",
    ),
}


@pytest.mark.parametrize("name", sorted(ROUNDTRIP))
def test_roundtrip(name):
    assert_roundtrip(ROUNDTRIP[name])


def test_convert_layout_is_pure_and_keeps_the_values():
    assert ConvertLayoutOp.has_trait(Pure)
    x = np.arange(4)
    assert ConvertLayoutOp.semantics(x) is x


def test_convert_layout_cannot_change_shape_or_element():
    assert_verify_error(
        func(f"%a: tile<64xi32, {BLOCKED_1}>", f"!%0 = gpu.convert_layout %a : tile<64xf32, {BLOCKED_2}>",
             "func.return"),
        "gpu.convert_layout",
        f"converts the layout only; tile<64xi32, {BLOCKED_1}> and tile<64xf32, {BLOCKED_2}> differ in shape or "
        "element type",
    )
