"""Instrumentation: the IR file on a verification failure, printing before verifying,
and the passes' statistics in the timing report."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import ClassVar

import pytest

from polytile.errors import PassFailure, VerificationError
from polytile.ir import parse_module
from polytile.passes import Pass, PassContext, PreservedAnalyses
from polytile.passes.instrumentation import IRPrinter, PassInstrumentation, PassTimer, Verifier, after_pass_order
from polytile.passes.manager import PassManager
from polytile.passes.pipeline import Pipeline, parse_pipeline
from polytile.passes.registry import PassRegistry
from polytile.ir_testing import dedent

MODULE = dedent("""
    func.func @k(%n: i32) attributes {kernel = true} {
      %m = arith.addi %n, %n : i32
      func.return
    }
""")


@dataclass
class Unterminate(Pass):
    """Leaves the IR invalid, but printable: drops the first function's terminator."""

    name: ClassVar[str] = "unterminate"

    def run(self, module, context):
        func = next(iter(module.body.block))
        func.body.block.last_op.erase()
        return None


@dataclass
class Crash(Pass):
    """Changes the IR, then fails: the ICE file must hold the changed IR."""

    name: ClassVar[str] = "crash"

    def run(self, module, context):
        func = next(iter(module.body.block))
        func.set_attr("test.touched", True)
        raise KeyError("oops")


@dataclass
class Counter(Pass):
    """Bumps statistics: ``zeta`` by 2, ``alpha`` by 1, and ``unused`` by 0."""

    name: ClassVar[str] = "counter"

    def run(self, module, context):
        context.count("counter.zeta", 2)
        context.count("counter.alpha")
        context.count("counter.unused", 0)
        return PreservedAnalyses.all()


REGISTRY = PassRegistry()
for _cls in (Unterminate, Crash, Counter):
    REGISTRY.register(_cls)


@pytest.fixture(autouse=True)
def _dumps_in_tmp_path(tmp_path, monkeypatch):
    """IR files the pass manager writes go to the test's own folder, not the system's."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def parse(text: str) -> Pipeline:
    return parse_pipeline(text, REGISTRY.create)


def path_in(message: str) -> str:
    found = re.search(r"The IR as the pass left it is in (\S+)", message)
    assert found, message
    return found.group(1)


# --------------------------------------------------------------------------------------
# Verification failures show the broken IR


def test_a_verification_failure_gives_a_file_with_the_ir_as_the_pass_left_it(tmp_path):
    with pytest.raises(VerificationError) as info:
        PassManager(parse("unterminate"), [Verifier()]).run(parse_module(MODULE))
    message = str(info.value)
    assert "the IR became invalid in pass 'unterminate' of stage 'main'" in message
    assert "POLYTILE_PRINT_IR_BEFORE=unterminate" in message
    with open(path_in(message)) as handle:
        text = handle.read()
    assert path_in(message).startswith(str(tmp_path))
    # The broken IR itself: the add is still there, the return is gone.
    assert "func.func @k" in text and "arith.addi" in text and "func.return" not in text


def test_the_ir_after_a_pass_is_printed_before_it_is_verified():
    stream = io.StringIO()
    # The verifier is listed first, yet the printer's dump must come out.
    instruments = [Verifier(), IRPrinter(after=["all"], stream=stream)]
    with pytest.raises(VerificationError, match="became invalid in pass 'unterminate'"):
        PassManager(parse("unterminate"), instruments).run(parse_module(MODULE))
    dumped = stream.getvalue()
    assert "// -----// IR after unterminate (main) //----- //" in dumped
    assert "arith.addi" in dumped and "func.return" not in dumped


def test_settings_print_the_ir_before_verifying(monkeypatch, capsys):
    from polytile import config

    monkeypatch.setattr("polytile.passes.registry.pass_registry", lambda: REGISTRY)
    with config.override(print_ir_after=["unterminate"], verify_each=True):
        with pytest.raises(VerificationError, match="became invalid in pass 'unterminate'"):
            PassManager(parse("unterminate")).run(parse_module(MODULE), label="k")
    assert "IR after unterminate (main)" in capsys.readouterr().err


def test_checking_instruments_run_last_after_a_pass_and_keep_their_order():
    class Checker(PassInstrumentation):
        checks_ir = True

    first, second = Verifier(), Checker()
    printer, timer = IRPrinter(), PassTimer()
    assert after_pass_order([first, printer, second, timer]) == [printer, timer, first, second]


def test_an_internal_error_file_holds_the_ir_as_the_pass_left_it():
    with pytest.raises(PassFailure) as info:
        PassManager(parse("crash"), []).run(parse_module(MODULE))
    with open(path_in(str(info.value))) as handle:
        assert "test.touched = true" in handle.read()


# --------------------------------------------------------------------------------------
# Statistics in the timing report


def test_the_timing_report_lists_nonzero_statistics_sorted():
    stream = io.StringIO()
    timer = PassTimer(stream=stream)
    context = PassManager(parse("counter,counter"), [timer]).run(parse_module(MODULE), label="k")
    assert context.statistics == {"counter.zeta": 4, "counter.alpha": 2, "counter.unused": 0}
    report = stream.getvalue()
    assert report == timer.report() + "\n"
    statistics = report.split("===- pass statistics -===\n", 1)[1]
    assert statistics == "counter.alpha  2\ncounter.zeta   4\n"
    assert timer.statistics == context.statistics


def test_no_statistics_section_when_nothing_was_counted():
    timer = PassTimer(stream=io.StringIO())
    PassManager(parse("unterminate"), [timer]).run(parse_module(MODULE))
    assert "statistics" not in timer.report() and "main/unterminate" in timer.report()


def test_core_pass_statistics_appear_in_the_report():
    from polytile.passes.manager import run_pipeline

    stream = io.StringIO()
    module = parse_module(dedent("""
        func.func @k(%p: ptr<i32>) attributes {kernel = true} {
          %a = arith.constant {value = 2} : i32
          %b = arith.constant {value = 3} : i32
          %c = arith.addi %a, %b : i32
          tile.store %p, %c
          func.return
        }
    """))
    run_pipeline(module, "canonicalize", instrumentation=[PassTimer(stream=stream)])
    assert re.search(r"^canonicalize\.folded +1$", stream.getvalue(), re.MULTILINE), stream.getvalue()


def test_instruments_without_the_statistics_keyword_still_work():
    seen = []

    class Old(PassInstrumentation):
        def after_pipeline(self, module, label):
            seen.append(("old", label))

    class Flexible(PassInstrumentation):
        def after_pipeline(self, module, label, **extra):
            seen.append(("flexible", dict(extra["statistics"])))

    PassManager(parse("counter"), [Old(), Flexible()]).run(parse_module(MODULE), label="k")
    assert seen == [("old", "k"), ("flexible", {"counter.zeta": 2, "counter.alpha": 1, "counter.unused": 0})]


def test_statistics_of_a_given_context_accumulate_across_runs():
    context = PassContext()
    timer = PassTimer(stream=io.StringIO())
    manager = PassManager(parse("counter"), [timer])
    manager.run(parse_module(MODULE), context)
    manager.run(parse_module(MODULE), context)
    assert "counter.zeta   4" in timer.report()
