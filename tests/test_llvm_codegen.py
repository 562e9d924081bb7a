"""The LLVM half of code generation the GPU backends share (polytile.llvm_codegen), on
LLVM's own NVPTX and AMDGPU targets with no backend involved.  The backends' emit passes
built on it are tested in tests/backends/*/test_codegen.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from polytile.errors import PolytileError
from polytile.llvm_codegen import (EmitFromLLVM, allow_contraction, link_library, llvm, optimized_module,
                                   target_machine)
from polytile.passes.pass_base import PassContext

KERNEL = """
declare float @lib_twice(float)

define float @kernel(float %x) {
  %y = call float @lib_twice(float %x)
  ret float %y
}
"""

LIBRARY = """
define float @lib_twice(float %x) {
  %y = fadd float %x, %x
  ret float %y
}

define float @lib_unused(float %x) {
  ret float %x
}
"""


@pytest.mark.parametrize("triple, cpu, features", [("nvptx64-nvidia-cuda", "sm_80", "+ptx80"),
                                                   ("amdgcn-amd-amdhsa", "gfx942", "")])
def test_one_target_machine_per_triple_cpu_and_features(triple, cpu, features):
    machine = target_machine(triple, cpu, features)
    assert target_machine(triple, cpu, features) is machine
    assert machine.triple == triple


def test_a_library_is_linked_in_and_its_functions_made_internal():
    linked = []

    def link(binding, module):
        linked.append(binding)
        link_library(module, binding.parse_assembly(LIBRARY).as_bitcode(), internal=("lib_",))

    module, machine = optimized_module(KERNEL, "nvptx64-nvidia-cuda", "sm_80", "+ptx80", link=link)
    assert linked == [llvm()]
    assert machine is target_machine("nvptx64-nvidia-cuda", "sm_80", "+ptx80")
    # Internal and used once: -O3 inlined lib_twice into the kernel and dropped both.
    assert {function.name for function in module.functions} == {"kernel"}
    assert "fadd" in str(module) or "fmul" in str(module)
    assert ".visible .func" in machine.emit_assembly(module)


def test_a_module_that_does_not_verify_is_refused():
    with pytest.raises(RuntimeError):
        optimized_module("define i32 @f() {\n  ret float 0.0\n}\n", "nvptx64-nvidia-cuda", "sm_80")


@dataclass
class EmitText(EmitFromLLVM):
    name: ClassVar[str] = "emit-text"
    summary: ClassVar[str] = "a test's emit pass"

    def emit(self, llvm_ir, context, kernel):
        context.artifacts["text"] = f"{kernel}: {len(llvm_ir)}"


def test_the_emit_pass_takes_the_llvm_ir_artifact_and_the_kernel_name():
    context = PassContext()
    context.artifacts.update({"llvm_ir": "abc", "kernel_name": "k"})
    EmitText().run(None, context)
    assert context.artifacts["text"] == "k: 3"


def test_the_emit_pass_without_llvm_ir_says_where_it_belongs():
    with pytest.raises(PolytileError, match="^emit-text needs the LLVM IR that lower-to-llvm makes; put it after "
                                            "lower-to-llvm$"):
        EmitText().run(None, PassContext())


def test_allow_contraction_marks_instructions_and_leaves_string_constants_alone():
    # A device_assert message may read like an instruction; marking it would change the
    # string's length and LLVM would refuse the module.
    text = '''@"msg" = private constant [11 x i8] c"y = fmul x\\00"

define float @k(float %a, float %"b c") {
  %".2" = fmul float %a, %"b c"
  %d = fadd float %".2", %a
  %e = fsub float %d, %a
  %f = fdiv float %e, %a
  ret float %f
}
'''
    marked = allow_contraction(text)
    assert 'c"y = fmul x\\00"' in marked
    assert '%".2" = fmul contract float' in marked and "%d = fadd contract float" in marked
    assert "%e = fsub contract float" in marked and "%f = fdiv float" in marked
    llvm().parse_assembly(marked).verify()
