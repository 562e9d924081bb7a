"""The ws dialect: its ops print and parse back, and the verifier names what is wrong."""

from __future__ import annotations

import pytest

from polytile.errors import VerificationError
from polytile.ir import parse_module, verify
from polytile.ir_testing import dedent, roundtrip

pytest.importorskip("polytile_warpspec")

SPLIT = """
func.func @k(%n: i32) -> i32 attributes {gpu.worker_warps = 4, kernel = true} {
  %0 = ws.warp_specialize {consumer_registers = 232, kernel_registers = 168, producer_registers = 40, producer_warps = 4} : i32 {
    ws.turn {step = "start"}
    ws.turn {step = "wait"}
    ws.turn {step = "pass"}
    ws.turn {step = "end"}
    ws.yield %n
  } {
    ws.yield
  }
  func.return %0
}
"""


def test_the_ops_round_trip():
    assert roundtrip(SPLIT) == dedent(SPLIT)
    verify(parse_module(dedent(SPLIT)))


@pytest.mark.parametrize("old, new, message", [
    ("producer_registers = 40", "producer_registers = 200", "the producer's (200) <= the kernel's (168)"),
    ("kernel_registers = 168", "kernel_registers = 172", "kernel_registers = 172: a warp group's registers"),
    ('step = "wait"', 'step = "later"', "step is one of wait, pass, start, end"),
    ("  } {\n    ws.yield\n", "  } {\n    ws.yield %n\n", "the producer region yields nothing"),
])
def test_the_verifier_names_what_is_wrong(old, new, message):
    text = dedent(SPLIT)
    assert old in text
    with pytest.raises(VerificationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        verify(parse_module(text.replace(old, new)))
