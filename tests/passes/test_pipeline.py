"""Pipelines: text form, anchors, the pass registry and the pass manager."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import pytest

from polytile.errors import ConfigError, PassFailure, UnknownNameError, VerificationError
from polytile.ir import parse_module, print_ir
from polytile.passes import Pass, PassContext, PreservedAnalyses
from polytile.passes.instrumentation import IRPrinter, PassTimer, Verifier
from polytile.passes.manager import PassManager
from polytile.passes.pass_base import Analysis, check_pass_class
from polytile.passes.pipeline import Pipeline, Stage, parse_pipeline
from polytile.passes.registry import PassRegistry
from polytile.ir_testing import dedent


@dataclass
class Tag(Pass):
    """Adds a discardable attribute to every function (for watching the order of passes)."""

    name: ClassVar[str] = "tag"
    label: str = "x"
    count: int = 1
    strict: bool = False
    mode: Literal["fast", "slow"] = "fast"
    names: tuple[str, ...] = ()

    def run(self, module, context):
        for func in module.body.block:
            seen = func.get_attr("test.tags", ())
            func.set_attr("test.tags", seen + (self.label,) * self.count)
        return PreservedAnalyses.none()


@dataclass
class Boom(Pass):
    name: ClassVar[str] = "boom"

    def run(self, module, context):
        raise RuntimeError("kaput")


@dataclass
class Breaker(Pass):
    """Leaves the IR invalid: drops the terminator of the first function."""

    name: ClassVar[str] = "breaker"

    def run(self, module, context):
        func = next(iter(module.body.block))
        func.body.block.last_op.erase()
        return None


def make_registry() -> PassRegistry:
    registry = PassRegistry()
    for cls in (Tag, Boom, Breaker):
        registry.register(cls)
    return registry


REGISTRY = make_registry()

MODULE = """\
func.func @k(%n: i32) {
  func.return
}
"""


def parse(text: str) -> Pipeline:
    return parse_pipeline(text, REGISTRY.create)


@pytest.mark.parametrize("text", [
    "tag",
    "tag,tag{label=y}",
    "tag{label=y count=3 strict=true mode=slow names=a,b}",
    "tile(tag,tag{count=2}),llvm(tag{label=z})",
    "tile(),llvm(tag)",
    "",
])
def test_pipeline_text_round_trips(text):
    assert str(parse(text)) == text
    assert parse(str(parse(text))) == parse(text)


def test_options_are_typed():
    pipeline = parse("tag{label=q count=0x10 strict=on mode=slow names=a,b}")
    tag = pipeline.stages[0].passes[0]
    assert (tag.label, tag.count, tag.strict, tag.mode, tag.names) == ("q", 16, True, "slow", ("a", "b"))


def test_option_names_accept_underscores_and_dashes():
    @dataclass
    class Opt(Pass):
        name: ClassVar[str] = "opt"
        max_depth: int = 2

        def run(self, module, context):
            return None

    assert Opt.from_options({"max_depth": "5"}).max_depth == 5
    assert Opt.from_options({"max-depth": "6"}).spelling() == "opt{max-depth=6}"


@pytest.mark.parametrize("text, message", [
    ("tga", "unknown pass 'tga'"),
    ("tag{lable=1}", "unknown option of pass 'tag' 'lable'"),
    ("tag{count=many}", "option 'count' of pass 'tag': 'many' is not an integer"),
    ("tag{strict=maybe}", "option 'strict' of pass 'tag': 'maybe' is not a boolean"),
    ("tag{mode=medium}", "'medium' is not allowed; use one of fast, slow"),
    ("tag{count=1 count=2}", "option 'count' is given twice"),
    ("tag,,tag", "expected a pass or stage name"),
    ("tile(tag", "expected ',' or ')' to close stage 'tile'"),
    ("tile(tag),tag", "mix of stages and bare passes"),
    ("tag tag", "expected ',' between passes"),
])
def test_bad_pipeline_text(text, message):
    with pytest.raises((ConfigError, UnknownNameError)) as info:
        parse(text)
    assert message in str(info.value)


def test_unknown_pass_lists_close_matches():
    with pytest.raises(UnknownNameError) as info:
        parse("tags")
    assert "did you mean 'tag'" in str(info.value)


def test_anchors_insert_replace_remove():
    pipeline = parse("tile(tag{label=a},tag{label=b}),llvm(boom)")
    pipeline.insert_before("tile", Tag(label="start"))
    pipeline.insert_after("tile", Tag(label="end"))
    pipeline.insert_after("tag#2", Tag(label="after-a"))
    pipeline.replace("boom", Tag(label="no-boom"))
    assert str(pipeline) == ("tile(tag{label=start},tag{label=a},tag{label=after-a},tag{label=b},tag{label=end}),"
                             "llvm(tag{label=no-boom})")
    pipeline.remove("llvm/tag")
    pipeline.remove("tag#4")
    assert str(pipeline) == "tile(tag{label=start},tag{label=a},tag{label=after-a},tag{label=end}),llvm()"


def test_a_pass_name_that_occurs_twice_means_its_first_occurrence():
    # As the core's tile stage and a GPU backend's distribute stage both run cse: the
    # bare name is the tile stage's on every backend.
    pipeline = parse("tile(tag{label=a},tag{label=b}),distribute(tag{label=c})")
    pipeline.insert_after("tag", Tag(label="first"))
    pipeline.insert_before("distribute/tag", Tag(label="d0"))
    pipeline.insert_after("tile/tag#3", Tag(label="after-b"))  # a, first, b: the third
    assert str(pipeline) == ("tile(tag{label=a},tag{label=first},tag{label=b},tag{label=after-b}),"
                             "distribute(tag{label=d0},tag{label=c})")
    pipeline.replace("distribute/tag", Tag(label="d"))  # the first tag of that stage
    pipeline.remove("tag")
    assert str(pipeline) == ("tile(tag{label=first},tag{label=b},tag{label=after-b}),"
                             "distribute(tag{label=d},tag{label=c})")


def test_unknown_anchors():
    pipeline = parse("tile(tag,tag)")
    with pytest.raises(UnknownNameError, match="unknown pipeline anchor 'tga'"):
        pipeline.insert_after("tga", Tag())
    with pytest.raises(ConfigError, match="occurs only 2 times"):
        pipeline.insert_after("tag#3", Tag())


def test_pass_manager_runs_in_order_with_printing_and_timing():
    module = parse_module(MODULE)
    stream = io.StringIO()
    timer = PassTimer(stream=stream)
    printer = IRPrinter(before=["tag"], after=["all"], stream=stream, print_initial=True)
    PassManager(parse("tile(tag{label=a}),llvm(tag{label=b})"), [Verifier(), printer, timer]).run(module, label="k")
    assert module.body.block.first_op.get_attr("test.tags") == ("a", "b")
    text = stream.getvalue()
    assert "// -----// IR of k before the pipeline //----- //" in text
    assert "// -----// IR before tag{label=a} (tile) //----- //" in text
    assert "// -----// IR after tag{label=b} (llvm) //----- //" in text
    assert 'test.tags = ["a", "b"]' in text
    assert "tile/tag{label=a}" in timer.report() and "total" in timer.report()


def test_printer_writes_files_in_order(tmp_path):
    module = parse_module(MODULE)
    printer = IRPrinter(after=["all"], directory=tmp_path)
    PassManager(parse("tag,tag{label=y}"), [printer]).run(module, label="my_kernel")
    files = sorted(p.name for p in (tmp_path / "my_kernel").iterdir())
    assert files == ["001-main-tag-after.ir", "002-main-tag-after.ir"]
    assert 'test.tags = ["x", "y"]' in (tmp_path / "my_kernel" / files[1]).read_text()


def test_internal_error_names_the_pass_and_offers_the_ir():
    module = parse_module(MODULE)
    with pytest.raises(PassFailure) as info:
        PassManager(parse("tag,boom"), []).run(module)
    message = str(info.value)
    assert "internal compiler error in pass 'boom': RuntimeError: kaput" in message
    assert f"It was raised at {__file__}:" in message and ", in run: raise RuntimeError(\"kaput\")" in message
    assert "POLYTILE_PRINT_IR_BEFORE=boom (polytile opt: --print-ir-before boom)" in message
    path = message.rsplit(" ", 1)[1]
    assert "func.func @k" in open(path).read()


def test_verifier_names_the_pass_that_broke_the_ir():
    module = parse_module(MODULE)
    with pytest.raises(VerificationError, match="became invalid in pass 'breaker' of stage 'main'"):
        PassManager(parse("breaker"), [Verifier()]).run(module)


def test_settings_drive_instrumentation(monkeypatch, capsys):
    from polytile import config
    from polytile.passes import instrumentation

    monkeypatch.setattr("polytile.passes.registry.pass_registry", lambda: REGISTRY)
    with config.override(print_ir_after=["tag"], time_passes=True, verify_each=True):
        kinds = [type(i) for i in instrumentation.instrumentation_from_config()]
        assert kinds == [Verifier, IRPrinter, PassTimer]
        PassManager(parse("tag")).run(parse_module(MODULE), label="k")
    err = capsys.readouterr().err
    assert "IR after tag (main)" in err and "pass timing: k" in err
    with config.override(print_ir_after=["tga"]):
        with pytest.raises(UnknownNameError, match="unknown pass 'tga' in setting 'print_ir_after'; did you mean 'tag'"):
            instrumentation.instrumentation_from_config()


class CountFunctions(Analysis):
    def __init__(self, op, analyses):
        super().__init__(op, analyses)
        self.count = len(op.body.block)


@dataclass
class UsesAnalysis(Pass):
    name: ClassVar[str] = "uses-analysis"
    keep: bool = True
    seen: list = field(default_factory=list, compare=False, repr=False)

    def run(self, module, context):
        self.seen.append(context.analyses.get(CountFunctions, module).count)
        return PreservedAnalyses.all() if self.keep else PreservedAnalyses.none()


def test_analyses_are_cached_until_invalidated():
    module = parse_module(MODULE)
    context = PassContext()
    first, second, third = UsesAnalysis(), UsesAnalysis(keep=False), UsesAnalysis()
    PassManager(Pipeline([Stage("main", [first, second, third])]), []).run(module, context)
    assert first.seen == second.seen == third.seen == [1]
    assert context.analyses.computed == 2  # computed once, reused, invalidated by `second`, recomputed


@pytest.mark.parametrize("cls, message", [
    (type("NoName", (Pass,), {}), "needs a kebab-case name"),
    (type("Bad", (Pass,), {"name": "Bad_Name"}), "needs a kebab-case name"),
    (type("NotDC", (Pass,), {"name": "not-dc", "run": lambda s, m, c: None}), "must be a @dataclass"),
])
def test_bad_pass_classes_are_rejected(cls, message):
    with pytest.raises((TypeError, ValueError), match=message):
        check_pass_class(cls)


def test_register_twice_names_both_owners():
    from polytile.errors import PluginConflictError
    from polytile.plugins.registry import PluginInfo

    registry = PassRegistry()
    with registry.owned_by(PluginInfo("one", "dist-one", "1.0")):
        registry.register(Tag)

    @dataclass
    class OtherTag(Pass):
        name: ClassVar[str] = "tag"

        def run(self, module, context):
            return None

    with registry.owned_by(PluginInfo("two", "dist-two", "2.0")):
        with pytest.raises(PluginConflictError, match="dist-one.*dist-two"):
            registry.register(OtherTag)


def test_dedent_helper_keeps_text():
    assert dedent("""
        a
          b
    """) == "a\n  b\n"
    assert print_ir(parse_module(MODULE)) == MODULE


def test_apply_passes_names_the_pass_that_broke_the_ir():
    from polytile.ir_testing import apply_passes

    with pytest.raises(VerificationError, match="became invalid in pass 'breaker'"):
        apply_passes(MODULE, Breaker())


def test_anchors_take_pass_instances_only():
    pipeline = parse("tile(tag)")
    with pytest.raises(TypeError, match="pipelines hold Pass instances, got str 'tag'.*MyPass\\(\\)"):
        pipeline.insert_after("tag", "tag")
    with pytest.raises(TypeError, match="got type"):
        pipeline.replace("tag", Tag)
