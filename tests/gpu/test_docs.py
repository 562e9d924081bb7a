"""docs/gpu-lowering.md stays accurate: its IR examples parse and print back, and the
axis info it shows is what the analysis finds."""

from __future__ import annotations

import re
from pathlib import Path

import polytile.gpu.layouts  # noqa: F401  (registers the layout attributes)
from polytile.gpu.layouts import MmaLayout
from polytile.ir import parse_module, print_ir
from polytile.passes.print_axis_info import TestPrintAxisInfo
from polytile.ir_testing import apply_passes

DOC = Path(__file__).resolve().parents[2] / "docs" / "gpu-lowering.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```\n", re.S | re.M)


def ir_blocks() -> list[str]:
    return [body for lang, body in FENCE.findall(DOC.read_text()) if lang == "ir"]


def test_ir_examples_round_trip():
    blocks = ir_blocks()
    assert len(blocks) == 2
    for text in blocks:
        assert print_ir(parse_module(text)) == text


def test_the_annotations_shown_are_what_the_analysis_finds():
    shown = ir_blocks()[0]
    bare = re.sub(r"(, )?pt\.axis_info = #axis_info<[^>]*>(, )?",
                  lambda m: ", " if m.group(1) and m.group(2) else "", shown).replace(" {}", "")
    annotated = apply_passes(bare, TestPrintAxisInfo())
    for line in shown.splitlines():
        for annotation in re.findall(r"pt\.axis_info = #axis_info<[^>]*>", line):
            name = line.split("=")[0].strip()
            assert any(l.strip().startswith(name + " ") and annotation in l for l in annotated.splitlines()), line


def test_mma_example():
    mma = MmaLayout(2, (2, 2), (16, 8))
    assert mma.thread_indices((64, 64), warp=0, lane=5)[:4] == [(1, 2), (1, 3), (9, 2), (9, 3)]
    assert mma.elements_per_thread((64, 64)) == 32
