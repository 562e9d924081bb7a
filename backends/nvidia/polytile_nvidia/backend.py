"""The NVIDIA backend: targets, options and device discovery.

``cuda.bindings`` is imported only inside :meth:`NvidiaBackend.active_devices`, so that
``import polytile`` and compiling for NVIDIA on a machine without a GPU stay cheap and
work without a driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from polytile.backend import (
    Backend,
    BackendOptions,
    BackendUnavailable,
    Device,
    check_vendor_call,
    import_vendor_module,
    vendor_error_name,
)
from polytile.errors import ConfigError
from polytile.plugins.distributions import installed_versions
from polytile.target import Target

from .architectures import ARCHITECTURES, architecture_for_compute_capability

#: A block holds at most 1024 threads on every architecture we support.
_MAX_NUM_WARPS = 1024 // 32
#: Thread block clusters go up to 16 blocks (8 portably) on Hopper.
_MAX_NUM_CTAS = 16
_MAX_REGISTERS_PER_THREAD = 255

_CUINIT_HINTS = {
    "CUDA_ERROR_INSUFFICIENT_DRIVER": "the NVIDIA driver is older than the CUDA version cuda-bindings was built for; "
    "upgrade the driver or install an older cuda-bindings",
    "CUDA_ERROR_NOT_INITIALIZED": "the driver could not initialise; see `nvidia-smi`",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "the kernel driver and libcuda.so are different versions; reboot or reinstall the driver",
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": "the forward-compatibility libcuda in use does not support this GPU",
}


@dataclass(frozen=True)
class NvidiaOptions(BackendOptions):
    #: Blocks per thread block cluster (Hopper); 1 means no cluster.
    num_ctas: int = 1
    #: Register cap per thread passed to ptxas as ``.maxnreg``; None lets ptxas choose.
    maxnreg: int | None = None
    #: On sm_90a, lower the dots that fit a warpgroup to wgmma.mma_async (False: mma.sync
    #: everywhere, as on sm_80).
    enable_wgmma: bool = True
    #: Launch with cuLaunchCooperativeKernel (Triton's option): every program of the grid
    #: is resident at once, so programs may wait for each other (a grid-wide barrier made
    #: of atomics); a grid larger than the GPU holds at once is a launch error.
    launch_cooperative_grid: bool = False


class NvidiaBackend(Backend):
    name = "nvidia"
    description = "NVIDIA GPUs (Ampere, Ada, Hopper) through LLVM NVPTX, ptxas and the CUDA driver"
    architectures = tuple(ARCHITECTURES)
    default_architecture = None
    options_class = NvidiaOptions

    def check_options(self, options: BackendOptions) -> None:
        super().check_options(options)
        assert isinstance(options, NvidiaOptions)
        if options.num_warps > _MAX_NUM_WARPS:
            raise ConfigError(
                f"option 'num_warps' of backend 'nvidia' must be at most {_MAX_NUM_WARPS} "
                f"(a block holds at most 1024 threads), got {options.num_warps}"
            )
        if not 1 <= options.num_ctas <= _MAX_NUM_CTAS:
            raise ConfigError(
                f"option 'num_ctas' of backend 'nvidia' must be between 1 and {_MAX_NUM_CTAS}, got {options.num_ctas}"
            )
        if options.num_ctas != 1:
            # Taken and ignored, the kernel would run, but not as asked.
            raise ConfigError(f"option 'num_ctas' of backend 'nvidia' is {options.num_ctas}: thread block clusters "
                              "are not supported yet; use num_ctas=1")
        # The base class checks plain int fields only; an optional int needs checking here.
        maxnreg = options.maxnreg
        if maxnreg is not None and (
            isinstance(maxnreg, bool) or not isinstance(maxnreg, int) or not 1 <= maxnreg <= _MAX_REGISTERS_PER_THREAD
        ):
            raise ConfigError(
                f"option 'maxnreg' of backend 'nvidia' must be None or an integer between 1 and "
                f"{_MAX_REGISTERS_PER_THREAD} (registers per thread), got {maxnreg!r}"
            )

    def active_devices(self) -> list[Device]:
        driver = _import_driver()
        try:
            (err,) = driver.cuInit(0)
        except (RuntimeError, OSError) as exc:  # cuda-bindings raises when libcuda.so cannot be loaded
            raise BackendUnavailable(f"CUDA driver not found: {exc}") from exc
        if _error_name(err) == "CUDA_ERROR_NO_DEVICE":
            return []
        if _error_name(err) != "CUDA_SUCCESS":
            name = _error_name(err)
            hint = _CUINIT_HINTS.get(name)
            raise BackendUnavailable(f"CUDA driver not usable: cuInit failed with {name}" + (f" ({hint})" if hint else ""))
        try:
            return _enumerate(driver)
        except (RuntimeError, OSError) as exc:
            raise BackendUnavailable(f"CUDA driver failed while listing devices: {exc}") from exc

    def versions(self) -> Mapping[str, str]:
        from .toolchain import toolchain_versions

        # The assembler that will run (nvJitLink or ptxas) and its version: a cubin made
        # by one must not be served for the other.  The libdevice that math links from:
        # the settings that choose it (libdevice_path, cuda_home) change the code.
        return {**installed_versions("llvmlite", "cuda-bindings"), **toolchain_versions(),
                "libdevice": _libdevice_identity()}

    def launch_path(self) -> str:
        """How kernels are launched in this process and why, for ``polytile info``: the
        native C launcher (built at install) or cuda-bindings, and why."""
        from .driver import launch_path

        return launch_path()

    def synchronize(self) -> None:
        """``cuCtxSynchronize`` on this thread's current context (where kernels launch)."""
        from .driver import synchronize

        synchronize()

    def make_launcher(self, *, compiled: Any, kernel_name: str, params: Any, options: BackendOptions) -> Any:
        """A :class:`~.launcher.Launcher` of the compiled cubin (loaded on a device at its
        first launch there)."""
        from polytile.errors import LaunchError

        from .launcher import Launcher

        cubin = compiled.binaries.get("cubin")
        if cubin is None:
            raise LaunchError(f"kernel '{kernel_name}': the NVIDIA compilation produced no cubin "
                              "(the assemble stage did not run; check the pipeline)")
        metadata = compiled.metadata
        return Launcher(cubin, metadata.get("kernel_name", kernel_name), [(p.name, p.type) for p in params],
                        # A kernel with worker warps (warp specialization) launches more.
                        num_warps=int(metadata.get("launch_warps", metadata.get("num_warps", options.num_warps))),
                        shared=int(metadata.get("shared_bytes", 0)), cooperative=options.launch_cooperative_grid)

    def gpu_target(self, target: Target, options: BackendOptions | None = None) -> Any:
        """The target data and hooks of the shared GPU lowering (polytile.gpu.lowering)."""
        from .codegen import nvidia_gpu_target

        return nvidia_gpu_target(self.resolve_target(target).arch,
                                 enable_wgmma=bool(getattr(options, "enable_wgmma", True)))

    def configure_pipeline(self, *, pipeline: Any, target: Target, options: BackendOptions) -> None:
        """The GPU stages every backend shares (polytile.gpu.pipeline), then
        assemble(emit-ptx, keep-loop-offsets, ptx-to-cubin)."""
        from polytile.gpu.pipeline import add_gpu_stages

        from .codegen import EmitPTX, PtxToCubin
        from .loop_offsets import KeepLoopOffsets

        add_gpu_stages(pipeline, assemble=[EmitPTX(), KeepLoopOffsets(), PtxToCubin()])


def import_python_api() -> Any:
    """``cuda.bindings.driver``, or BackendUnavailable saying what is missing."""
    return import_vendor_module("cuda.bindings.driver", distribution="cuda-bindings", install_hint="pip install cuda-bindings",
                                runtime="CUDA driver", missing_names=("cuda", "cuda.bindings", "cuda.bindings.driver"))


def _import_driver() -> Any:
    # The calls through cuda-bindings' C layer where it can (see driver_calls): importing
    # cuda.bindings.driver would cost more than the rest of a warm start.
    from .driver_calls import driver_calls

    return driver_calls(import_python_api)


def _error_name(err: Any) -> str:
    return vendor_error_name(err)


def _check(result: tuple, call: str) -> Any:
    return check_vendor_call(result, call, success="CUDA_SUCCESS", runtime="CUDA driver")


def _enumerate(driver: Any) -> list[Device]:
    attr = driver.CUdevice_attribute
    count = _check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
    devices: list[Device] = []
    unsupported: list[str] = []
    for index in range(count):
        dev = _check(driver.cuDeviceGet(index), "cuDeviceGet")
        raw_name = _check(driver.cuDeviceGetName(256, dev), "cuDeviceGetName")
        name = raw_name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw_name, bytes) else str(raw_name)

        def get(attribute: str) -> int:
            return int(_check(driver.cuDeviceGetAttribute(getattr(attr, attribute), dev), "cuDeviceGetAttribute"))

        major = get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
        minor = get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
        arch = architecture_for_compute_capability(major, minor)
        if arch is None:
            unsupported.append(f"device {index} '{name}' (compute capability {major}.{minor})")
            continue
        properties = {
            "compute_capability": (major, minor),
            "multiprocessor_count": get("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            "warp_size": get("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
            # What a kernel may use: the opt-in limit, which polytile's launcher opts in to.
            "shared_memory_per_block": get("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            "shared_memory_per_block_optin": get("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        }
        devices.append(Device(Target("nvidia", arch.name), name, index, properties))
    if unsupported and not devices:
        # Say why a machine with a GPU shows no device, rather than an unexplained [].
        raise BackendUnavailable(
            "no supported NVIDIA GPU: found "
            + ", ".join(unsupported)
            + "; polytile-nvidia compiles for "
            + ", ".join(ARCHITECTURES)
        )
    return devices


def _libdevice_identity() -> str:
    """The libdevice file math would link: its path, size and modification time, or why
    there is none (a kernel without math functions compiles anyway)."""
    from polytile.errors import PolytileError

    from .libdevice import find_libdevice

    try:
        path = find_libdevice()
        info = path.stat()
    except (PolytileError, OSError) as exc:  # not found, a setting naming nothing, unreadable: keyed so
        return f"none ({type(exc).__name__})"
    return f"{path} {info.st_size} {info.st_mtime_ns}"
