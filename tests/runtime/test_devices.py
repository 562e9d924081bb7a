"""polytile.device_properties() on the interpreter: the CPU stands for the device, so that
a persistent kernel's grid (one program per SM) works on every target."""

from __future__ import annotations

import os

import pytest

import polytile as pt
from polytile.errors import LaunchError


def test_the_interpreter_reports_the_cpu():
    properties = pt.device_properties(target="interp")
    assert properties == {"name": "polytile interpreter (CPU)", "target": "interp", "index": 0,
                          "multiprocessor_count": os.cpu_count() or 1, "warp_size": 1, "shared_memory_per_block": 0}


def test_a_device_that_does_not_exist_is_named():
    with pytest.raises(LaunchError, match=r"device_properties\(3\): the target interp \(from target= argument\) has "
                                          r"devices 0-0"):
        pt.device_properties(3, target="interp")
