"""The settings of the NVIDIA backend: toolkit paths, how PTX is assembled, how kernels launch."""

from polytile.config import PATH, Choice, Setting

#: Declared to polytile's settings registry by this backend's plugin module
#: (hook ``polytile_register_settings``); read with ``polytile.config.get(name)``.
#: Only ``polytile.config`` is imported here, so declaring costs no vendor import.
SETTINGS = (
    Setting(
        "cuda_home", PATH, None, ("POLYTILE_CUDA_HOME",), optional=True, fallback_env=("CUDA_HOME", "CUDA_PATH"),
        recompiles=True,
        doc="Root of the CUDA toolkit, where ptxas (bin/) and libdevice (nvvm/libdevice/) are looked for. When "
        "unset, the NVIDIA backend looks in the nvidia-cuda-nvcc wheel and on PATH. CUDA_HOME and CUDA_PATH are read "
        "only after the project file, so a project's cuda_home wins over a machine-wide toolkit.",
    ),
    Setting(
        "libdevice_path", PATH, None, ("POLYTILE_LIBDEVICE",), optional=True,
        recompiles=True,
        doc="The libdevice bitcode file (libdevice.10.bc) to link math functions from, when the one under cuda_home "
        "is not the one wanted.",
    ),
    Setting(
        "ptxas_path", PATH, None, ("POLYTILE_PTXAS",), optional=True,
        recompiles=True,
        doc="The ptxas executable used when nvidia_assembler is 'ptxas', or 'auto' without nvJitLink or for a kernel "
        "whose PTX needs whole-program compilation (setmaxnreg: warp specialization). When unset, it is looked for under cuda_home, in the nvidia-cuda-nvcc wheel, on PATH, then under /usr/local/cuda*.",
    ),
    Setting(
        "nvidia_assembler", Choice("auto", "nvjitlink", "ptxas"), "auto", ("POLYTILE_NVIDIA_ASSEMBLER",),
        recompiles=True,
        doc="How PTX becomes a cubin: 'auto' links in process with nvJitLink when libnvJitLink loads, else runs "
        "ptxas, and runs ptxas for PTX that reallocates registers (setmaxnreg, which nvJitLink's relocatable "
        "compilation ignores) when one is found; 'nvjitlink' requires nvJitLink (an error when it cannot load); "
        "'ptxas' runs the ptxas executable (see ptxas_path).",
    ),
    Setting(
        "nvidia_launch", Choice("auto", "native", "bindings"), "auto", ("POLYTILE_NVIDIA_LAUNCH",),
        doc="How NVIDIA kernels are launched: 'native' packs the arguments and calls cuLaunchKernel in the C "
        "extension polytile_nvidia._launch, built when polytile-nvidia is installed (built at run time into cache_dir "
        "with the system C compiler only where the installed one is missing or older than its source; an error when "
        "it cannot be used); 'bindings' calls cuLaunchKernel through cuda-bindings (slower per launch); 'auto' uses "
        "'native' when it can, else 'bindings' ('polytile info' says which, and why).",
    ),
)
