"""The AMD backend: targets, options, device discovery, its pipeline and launcher.

``hip`` (hip-python) is imported only inside :meth:`AmdBackend.active_devices` and the
driver (:mod:`.driver`, when a kernel is launched): it needs the ROCm runtime, and
compiling for AMD (llvmlite and ld.lld) must work without one.  See docs/amd.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from polytile.backend import (
    ArgumentLayout,
    ArgumentSlot,
    Backend,
    BackendOptions,
    BackendUnavailable,
    Device,
    check_vendor_call,
    installed_versions,
    vendor_error_name,
)
from polytile.errors import ConfigError
from polytile.target import Target

from .architectures import ARCHITECTURES, architecture_for_gcn_arch_name

#: 0 lets the compiler choose; 16 and 32 pick the MFMA 16x16 or 32x32 shapes (see
#: polytile_amd.matrix.choose).  The 4x4 MFMAs are not used yet, so 4 is refused.
_MATRIX_INSTR_NONKDIM = (0, 16, 32)


@dataclass(frozen=True)
class AmdOptions(BackendOptions):
    #: Occupancy hint (``amdgpu-waves-per-eu``); 0 leaves it to the compiler.
    waves_per_eu: int = 0
    #: M and N of the MFMA instruction used for ``dot`` (16 or 32) where the dot is that
    #: large; 0 leaves it to the compiler (32 where M and N allow).  WMMA has only 16.
    matrix_instr_nonkdim: int = 0


class AmdBackend(Backend):
    name = "amd"
    description = "AMD GPUs (CDNA2/3/4, RDNA3) through LLVM AMDGPU, ld.lld and the HIP runtime"
    architectures = tuple(ARCHITECTURES)
    default_architecture = None
    options_class = AmdOptions

    def check_options(self, options: BackendOptions) -> None:
        super().check_options(options)
        assert isinstance(options, AmdOptions)
        if options.waves_per_eu < 0:
            raise ConfigError(
                f"option 'waves_per_eu' of backend 'amd' must be >= 0 (0 lets the compiler choose), got {options.waves_per_eu}"
            )
        if options.matrix_instr_nonkdim not in _MATRIX_INSTR_NONKDIM:
            raise ConfigError(
                "option 'matrix_instr_nonkdim' of backend 'amd' must be one of "
                + ", ".join(map(str, _MATRIX_INSTR_NONKDIM))
                + f" (0 lets the compiler choose), got {options.matrix_instr_nonkdim}"
            )

    def active_devices(self) -> list[Device]:
        hip = _import_hip()
        try:
            (err,) = hip.hipInit(0)
        except (RuntimeError, OSError) as exc:  # hip-python raises when libamdhip64.so cannot be loaded
            raise BackendUnavailable(f"ROCm runtime not found: {exc}") from exc
        if _error_name(err) == "hipErrorNoDevice":
            return []
        if _error_name(err) != "hipSuccess":
            raise BackendUnavailable(f"ROCm runtime not usable: hipInit failed with {_error_name(err)}")
        try:
            return _enumerate(hip)
        except (RuntimeError, OSError) as exc:
            raise BackendUnavailable(f"ROCm runtime failed while listing devices: {exc}") from exc

    def versions(self) -> Mapping[str, str]:
        from .toolchain import find_device_libs, toolchain_versions

        # Whether ocml is found decides how math functions are lowered, so its place
        # enters the cache key next to the linker's version.
        libs = find_device_libs()
        return {**installed_versions("llvmlite", "hip-python"), **toolchain_versions(),
                "amd-device-libs": str(libs) if libs is not None else "none"}

    def argument_layout(self, *, kernel_name: str, params: Any, metadata: Mapping[str, Any]) -> ArgumentLayout:
        """The offsets the code object declares for the kernel's explicit arguments (its
        ``.args`` notes, recorded by link-hsaco as ``amd_code_object``); the hidden
        arguments the runtime appends are not the caller's and are left out."""
        from .assemble import CODE_OBJECT_METADATA
        from .codeobject import KernelInfo

        info = metadata.get(CODE_OBJECT_METADATA)
        if not info:
            raise ValueError(f"kernel '{kernel_name}': no code object metadata ({CODE_OBJECT_METADATA}) to read "
                             "the argument offsets from; the assemble stage's link-hsaco records it")
        kernel = KernelInfo.from_dict(info)
        declared = kernel.explicit_arguments
        if len(declared) != len(params):
            raise ValueError(f"kernel '{kernel_name}': the code object declares {len(declared)} arguments but the "
                             f"kernel has {len(params)} run-time parameters ({', '.join(p.name for p in params)})")
        # Natural alignment: what the code object's offsets were laid out by (it records
        # only the segment's alignment).
        slots = tuple(ArgumentSlot(arg.size, min(arg.size, 8), arg.offset) for arg in declared)
        return ArgumentLayout(slots, kernel.explicit_size)

    def threads_per_warp(self, target: Target) -> int:
        return ARCHITECTURES[target.arch].wavefront_size

    def gpu_target(self, target: Target, options: BackendOptions | None = None) -> Any:
        """The target data and hooks of the shared GPU lowering (polytile.gpu.lowering)."""
        from .codegen import amd_gpu_target

        return amd_gpu_target(self.resolve_target(target).arch, getattr(options, "waves_per_eu", 0) or 0,
                              getattr(options, "matrix_instr_nonkdim", 0) or 0)

    def synchronize(self) -> None:
        """``hipDeviceSynchronize`` on this thread's current device."""
        from .driver import synchronize

        synchronize()

    def make_launcher(self, *, compiled: Any, kernel_name: str, params: Any, options: BackendOptions) -> Any:
        """A :class:`~.launcher.Launcher` of the kernel's HSACO (``compiled.binaries['hsaco']``)."""
        from .launcher import Launcher

        arch = ARCHITECTURES[compiled.target.arch]
        return Launcher(compiled.binaries["hsaco"], kernel_name, [(p.name, p.type) for p in params],
                        num_warps=options.num_warps, warp_size=arch.wavefront_size)

    def configure_pipeline(self, *, pipeline: Any, target: Target, options: BackendOptions) -> None:
        """The GPU stages every backend shares (polytile.gpu.pipeline), then assemble(emit-amdgcn, link-hsaco)."""
        from polytile.gpu.pipeline import add_gpu_stages

        from .assemble import LinkHSACO
        from .codegen import EmitAMDGCN

        add_gpu_stages(pipeline, assemble=[EmitAMDGCN(), LinkHSACO()])


def _import_hip() -> Any:
    from .driver import import_bindings

    return import_bindings()


def _error_name(err: Any) -> str:
    return vendor_error_name(err)


def _check(result: tuple, call: str) -> Any:
    return check_vendor_call(result, call, success="hipSuccess", runtime="HIP runtime")


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).split(b"\0", 1)[0].decode(errors="replace")
    return str(value)


def _enumerate(hip: Any) -> list[Device]:
    result = hip.hipGetDeviceCount()
    if _error_name(result[0]) == "hipErrorNoDevice":
        return []
    count = _check(result, "hipGetDeviceCount")
    devices: list[Device] = []
    unsupported: list[str] = []
    for index in range(count):
        props = _check(hip.hipGetDeviceProperties(index), "hipGetDeviceProperties")
        name = _text(props.name)
        gcn_arch_name = _text(props.gcnArchName)
        arch = architecture_for_gcn_arch_name(gcn_arch_name)
        if arch is None:
            unsupported.append(f"device {index} '{name}' ({gcn_arch_name or 'unknown architecture'})")
            continue
        properties = {
            "gcn_arch_name": gcn_arch_name,
            "multiprocessor_count": int(props.multiProcessorCount),
            "shared_memory_per_block": int(props.sharedMemPerBlock),
            "warp_size": int(props.warpSize),
            "wavefront_size": int(props.warpSize),
        }
        devices.append(Device(Target("amd", arch.name), name, index, properties))
    if unsupported and not devices:
        # Say why a machine with a GPU shows no device, rather than an unexplained [].
        raise BackendUnavailable(
            "no supported AMD GPU: found " + ", ".join(unsupported) + "; polytile-amd compiles for " + ", ".join(ARCHITECTURES)
        )
    return devices
