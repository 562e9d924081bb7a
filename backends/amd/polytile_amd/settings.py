"""The settings of the AMD backend: where ROCm, its linker and its device libraries are."""

from polytile.config import PATH, Setting

#: Declared to polytile's settings registry by this backend's plugin module
#: (hook ``polytile_register_settings``); read with ``polytile.config.get(name)``.
#: Only ``polytile.config`` is imported here, so declaring costs no vendor import.
SETTINGS = (
    Setting(
        "rocm_path", PATH, None, ("POLYTILE_ROCM_PATH",), optional=True, fallback_env=("ROCM_PATH",),
        recompiles=True,
        doc="Root of the ROCm installation, where ld.lld (llvm/bin/) and the device libraries (amdgcn/bitcode/) are "
        "looked for. ROCM_PATH is read only after the project file, so a project's rocm_path wins over a "
        "machine-wide installation.",
    ),
    Setting(
        "amd_lld", PATH, None, ("POLYTILE_AMD_LLD",), optional=True,
        recompiles=True,
        doc="The ld.lld executable that links AMDGPU objects into HSACO code objects. When unset, it is looked for "
        "under rocm_path (llvm/bin, lib/llvm/bin), /opt/rocm, then on PATH (ld.lld, then the highest ld.lld-NN or "
        "/usr/lib/llvm-NN/bin/ld.lld).",
    ),
    Setting(
        "amd_device_libs", PATH, None, ("POLYTILE_AMD_DEVICE_LIBS",), optional=True,
        recompiles=True,
        doc="Directory holding the ROCm device library bitcode (ocml.bc, ockl.bc) to link math functions from. When "
        "unset: rocm_path/amdgcn/bitcode, ROCm's clang directory, /opt/rocm*, then Debian's "
        "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode. Without it, math uses LLVM intrinsics where they exist.",
    ),
)
