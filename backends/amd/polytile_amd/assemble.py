"""An AMDGPU object to an HSACO code object with ``ld.lld -shared``, and the
``link-hsaco`` pass.

ld.lld is found by :func:`.toolchain.find_lld`.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any, ClassVar

from polytile.errors import PolytileError
from polytile.gpu.scratch import scratch_directory
from polytile.passes.pass_base import Pass, PassContext, PreservedAnalyses

from .codegen import AMDGPU_OBJECT
from .errors import LinkError
from .toolchain import find_lld

#: Artifact keys: the code object, and what its metadata note says about the kernel.
HSACO = "hsaco"
CODE_OBJECT_METADATA = "amd_code_object"

def link_hsaco(obj: bytes, kernel: str = "kernel", arch: str = "") -> bytes:
    """``ld.lld -shared`` of one relocatable AMDGPU object: the HSACO bytes."""
    lld = find_lld()
    with scratch_directory("polytile-amd-", kernel=kernel, tool="ld.lld", error=LinkError) as scratch:
        source, output = scratch / f"{kernel}.o", scratch / f"{kernel}.hsaco"
        source.write_bytes(obj)
        try:
            done = subprocess.run([str(lld), "-shared", str(source), "-o", str(output)],
                                  capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            raise LinkError(f"kernel '{kernel}': running {lld} failed: {exc}") from None
        if done.returncode != 0 or not output.is_file():
            log = (done.stderr or done.stdout).strip() or "(ld.lld printed nothing)"
            raise LinkError(f"kernel '{kernel}': {lld} could not link its {arch} object into a code object:\n"
                            + "\n".join(f"  {line}" for line in log.splitlines()))
        return output.read_bytes()


@dataclass
class LinkHSACO(Pass):
    """The object of emit-amdgcn (artifact 'amdgpu_object') to an HSACO (artifact 'hsaco'),
    the kernel's entry of the code object's metadata (artifact 'amd_code_object') and what
    it takes of the device (artifact 'resources', see :mod:`polytile_amd.occupancy`)."""

    name: ClassVar[str] = "link-hsaco"
    summary: ClassVar[str] = "AMDGPU object to an HSACO code object through ld.lld"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from .codeobject import read_code_object

        obj = context.artifacts.get(AMDGPU_OBJECT)
        if obj is None:
            raise PolytileError("link-hsaco needs the object that emit-amdgcn makes; put it after emit-amdgcn")
        kernel = context.artifacts.get("kernel_name", "kernel")
        hsaco = link_hsaco(obj, kernel, context.target.arch)
        context.artifacts[HSACO] = hsaco
        code_object = read_code_object(hsaco)
        found = code_object.kernel(kernel) if kernel in code_object.kernels else None
        context.artifacts[CODE_OBJECT_METADATA] = found.as_dict() if found is not None else None
        if found is not None:
            from polytile.resources import RESOURCES

            from .occupancy import kernel_resources

            context.artifacts[RESOURCES] = kernel_resources(context.target.arch, found)
        return PreservedAnalyses.all()


__all__ = ["CODE_OBJECT_METADATA", "HSACO", "LinkHSACO", "link_hsaco"]
