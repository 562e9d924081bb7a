"""The attention configuration sweep's table: ratios, notes and each tool's fastest configuration."""

from __future__ import annotations

import pytest

from bench.attention_configs import CONFIGS, KERNELS, Row, exit_status, format_rows, main


def test_table_gives_ratios_notes_and_each_tools_fastest_configuration():
    rows = [
        Row(128, "pointer", False, (128, 64, 8, 3), 420.0, 430.0),
        Row(128, "pointer", False, (128, 128, 8, 2), 440.0, 400.0),
        Row(128, "descriptor", False, (128, 128, 8, 3), None, None,
            "polytile: CompilationError: needs 262304 bytes of shared memory"),
    ]
    text = format_rows(rows)
    lines = text.splitlines()
    assert lines[1].split()[-1] == "0.98x"
    assert lines[2].split()[-1] == "1.10x"
    assert "needs 262304 bytes" in lines[3] and "-" in lines[3].split()
    # Best against best, each at its own configuration: polytile's 440 at 128 x 128
    # blocks, Triton's 430 at 128 x 64.
    assert "d=128 pointer: polytile 440 at 128x128x8x2; triton 430 at 128x64x8x3" in text
    assert "d=128 descriptor:" in text  # a group with no rate still shows, with nothing after it


def test_every_head_dim_has_configs_and_the_cli_refuses_unknown_kernels(capsys):
    assert set(CONFIGS) == {64, 128} and all(len(c) == 4 for cs in CONFIGS.values() for c in cs)
    assert KERNELS == ("pointer", "descriptor", "descriptor_ws", "descriptor_ws_overlap")
    with pytest.raises(SystemExit) as exit_:
        main(["--kernels", "nope"])
    assert exit_.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_a_wrong_result_fails_the_run_even_when_the_other_tool_failed_too():
    # Both tools' notes are kept: Triton's failure at a configuration must not hide
    # polytile's wrong result there.
    row = Row(128, "descriptor", False, (128, 128, 8, 3), None, None,
              "polytile: wrong result (max error 0.5); triton: OutOfResources: out of shared memory")
    assert exit_status([row]) == 1 and "wrong result" in format_rows([row])
    assert exit_status([Row(64, "pointer", True, (128, 64, 4, 3), 300.0, None, "triton: OutOfResources")]) == 0
