"""The LLVM half of code generation that every GPU backend shares: LLVM IR text in,
an optimized llvmlite module and the target machine that emits it out.

A GPU backend's last lowering pass (``lower-to-llvm``, :mod:`polytile.gpu.lowering`)
leaves LLVM IR text in the artifact ``'llvm_ir'``.  What a backend does with it next is
the same up to the target: parse it, link the vendor's bitcode math library in when the
kernel calls it, verify, run LLVM's -O3 pipeline for the target machine, and emit
assembly (or an object) from that machine.  This module does those steps once:

* :func:`llvm`: ``llvmlite.binding`` with every target and assembly printer initialised,
  imported on first use (compiling for the interpreter never loads it);
* :func:`target_machine`: one machine per (triple, cpu, features), made once a process;
* :func:`link_library`: a bitcode library linked in, its definitions made internal so
  that -O3 inlines what is used and drops the rest;
* :func:`optimize` and :func:`optimized_module`;
* :class:`EmitFromLLVM`: the base of a backend's emit pass (``emit-ptx``,
  ``emit-amdgcn``), which takes the LLVM IR artifact and says where to put the pass
  when there is none.

A backend passes its data (triple, cpu, features) and, for linking, a callable; the
rest is here.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable, ClassVar

from .errors import PolytileError
from .gpu.lowering.module import LLVM_IR
from .passes.pass_base import Pass, PassContext, PreservedAnalyses


@functools.lru_cache(maxsize=None)
def llvm() -> Any:
    """``llvmlite.binding``, with every target and assembly printer initialised."""
    import llvmlite.binding as binding

    binding.initialize_all_targets()
    binding.initialize_all_asmprinters()
    return binding


@functools.lru_cache(maxsize=None)
def target_machine(triple: str, cpu: str, features: str = "") -> Any:
    """The -O3 target machine of ``triple`` for ``cpu`` ("sm_90a", "gfx942") with
    ``features`` ("+ptx80"; "" for the cpu's own), made once per process."""
    return llvm().Target.from_triple(triple).create_target_machine(cpu=cpu, features=features, opt=3)


def link_library(module: Any, bitcode: bytes, *, internal: tuple[str, ...]) -> None:
    """Link the bitcode library ``bitcode`` into ``module`` (a parsed llvmlite module),
    under the module's triple and data layout; the functions it defines whose names start
    with one of ``internal`` become internal, so that -O3 inlines the ones the kernel
    calls and drops the others."""
    binding = llvm()
    library = binding.parse_bitcode(bitcode)
    library.triple = module.triple
    library.data_layout = module.data_layout
    module.link_in(library)
    for function in module.functions:
        if not function.is_declaration and function.name.startswith(internal):
            function.linkage = binding.Linkage.internal


def optimize(module: Any, machine: Any, speed_level: int = 3) -> None:
    """Run LLVM's module pipeline at ``-O<speed_level>`` for ``machine`` on ``module``."""
    binding = llvm()
    builder = binding.create_pass_builder(machine, binding.create_pipeline_tuning_options(speed_level=speed_level))
    builder.getModulePassManager().run(module, builder)


def optimized_module(llvm_ir: str, triple: str, cpu: str, features: str = "",
                     link: Callable[[Any, Any], None] | None = None) -> tuple[Any, Any]:
    """``(module, machine)``: ``llvm_ir`` parsed, linked (``link(binding, module)``, where
    a kernel needs a library), verified and optimized at -O3 for the target machine of
    ``triple``, ``cpu`` and ``features``, which is returned with it to emit the module."""
    binding = llvm()
    module = binding.parse_assembly(llvm_ir)
    if link is not None:
        link(binding, module)
    module.verify()
    machine = target_machine(triple, cpu, features)
    optimize(module, machine)
    return module, machine


#: A float add, subtract or multiply in llvmlite's printed IR (``  %"x" = fmul float ...``):
#: an instruction line, so that the words in a string constant (a ``device_assert``
#: message) are left alone.
_FLOAT_ARITHMETIC = re.compile(r'^(\s+%(?:"[^"\n]*"|[-\w.$]+) = )(fadd|fsub|fmul) ', re.MULTILINE)


def allow_contraction(llvm_ir: str) -> str:
    """The IR with every float add, subtract and multiply marked ``contract``, so that
    LLVM may fuse ``a * b + c`` into one fused multiply-add (NVPTX: ``fma.rn``, and the
    rest printed without ``.rn``, whose explicit rounding forbids ptxas to fuse; AMDGPU:
    ``v_fma``/``v_fmac``): the option ``enable_fp_fusion``, Triton's default."""
    return _FLOAT_ARITHMETIC.sub(r"\1\2 contract ", llvm_ir)


class EmitFromLLVM(Pass):
    """The base of a backend's pass from LLVM IR (artifact ``'llvm_ir'``, which
    ``lower-to-llvm`` makes) to what its assembler takes.  A subclass (a dataclass, as
    every pass) sets ``name`` and ``summary`` and implements :meth:`emit`, which gets the
    IR with float arithmetic marked ``contract`` where the kernel's ``enable_fp_fusion``
    is on (:func:`allow_contraction`), so every backend honours the option alike."""

    name: ClassVar[str] = ""

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        llvm_ir = context.artifacts.get(LLVM_IR)
        if llvm_ir is None:
            raise PolytileError(f"{self.name} needs the LLVM IR that lower-to-llvm makes; put it after lower-to-llvm")
        if getattr(context.options, "enable_fp_fusion", True):
            llvm_ir = allow_contraction(llvm_ir)
        self.emit(llvm_ir, context, context.artifacts.get("kernel_name", "kernel"))
        return PreservedAnalyses.all()

    def emit(self, llvm_ir: str, context: PassContext, kernel: str) -> None:
        """Turn ``llvm_ir`` (of the kernel named ``kernel``) into this backend's artifacts
        in ``context.artifacts``."""
        raise NotImplementedError


__all__ = ["EmitFromLLVM", "allow_contraction", "link_library", "llvm", "optimize", "optimized_module", "target_machine"]
