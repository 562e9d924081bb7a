"""Where the benchmarks run: the arrays, the clock and the copy bandwidth of one device.

Two devices, with one interface, so that the rest of the harness does not care which:

- :class:`TorchCudaDevice`: torch tensors on the current CUDA device, timed with CUDA
  events, the L2 cache flushed before every timed launch.
- :class:`NumpyDevice`: NumPy arrays for the interpreter, timed with ``perf_counter``.
  Its numbers only show that the harness works; the interpreter is not a fast target.

Dtypes are named by short strings (``"f32"``, ``"bf16"``, ``"f16"``, ``"e4m3"`` for
fp8 e4m3) everywhere in the harness, in the table and in the JSON.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "e4m3": 1}
_NUMPY_DTYPES = {"f32": np.float32, "f16": np.float16}


@dataclass(frozen=True)
class TimingPlan:
    """How long to warm up and to measure, as in ``triton.testing.do_bench``: the number
    of repetitions follows from a first estimate of one call's time, within bounds.
    ``rounds``: the compilers of a row are timed in turn this many times (polytile,
    Triton, torch, then again), and each one's rate is the median of its rounds, so
    that a GPU's clocks drifting with its temperature and power (large matmuls) weigh
    on every compiler alike instead of on whichever ran last."""

    warmup_ms: float
    rep_ms: float
    min_reps: int
    max_reps: int
    rounds: int = 1

    def counts(self, estimate_ms: float) -> tuple[int, int]:
        estimate_ms = max(estimate_ms, 1e-6)
        warmup = max(1, int(self.warmup_ms / estimate_ms))
        reps = min(self.max_reps, max(self.min_reps, int(self.rep_ms / estimate_ms)))
        return warmup, reps


#: Per size class; "tiny" runs every mode on the interpreter in seconds.
TIMING_PLANS = {
    "tiny": TimingPlan(warmup_ms=0.0, rep_ms=0.0, min_reps=3, max_reps=3),
    "small": TimingPlan(warmup_ms=25.0, rep_ms=100.0, min_reps=10, max_reps=1000),
    "full": TimingPlan(warmup_ms=25.0, rep_ms=100.0, min_reps=10, max_reps=1000, rounds=3),
}


class Device:
    """The interface both devices implement (see the module docstring)."""

    #: "interp" or "nvidia": which polytile backend runs kernels on this device.
    backend = ""
    #: The array library, as in the JSON's versions.
    library = ""
    #: Dtype names this device's array library can hold.
    dtypes: tuple[str, ...] = ()

    def name(self) -> str:
        raise NotImplementedError

    def randn(self, shape: tuple[int, ...], dtype: str, seed: int) -> Any:
        raise NotImplementedError

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        raise NotImplementedError

    def fill_nan(self, array: Any) -> None:
        """Poison an output, so that a kernel that writes nothing cannot pass a check on
        what another kernel wrote before it."""
        raise NotImplementedError

    def programs(self) -> int:
        """One program per streaming multiprocessor (the interpreter: per CPU core): the
        grid of a persistent kernel."""
        raise NotImplementedError

    def row_stride(self, array: Any) -> int:
        raise NotImplementedError

    def host(self, array: Any, rows: np.ndarray | None = None) -> np.ndarray:
        """A float32 NumPy copy of ``array`` (of the given rows only, when ``rows`` is set)."""
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError

    def time_ms(self, fn: Callable[[], None], plan: TimingPlan) -> list[float]:
        """Times of single calls of ``fn`` in milliseconds, after warm-up."""
        raise NotImplementedError

    def copy_bandwidth_gbs(self, size_class: str) -> float:
        """Bytes read plus bytes written per second by the array library's own copy."""
        raise NotImplementedError

    def versions(self) -> dict[str, str]:
        raise NotImplementedError


class NumpyDevice(Device):
    backend = "interp"
    library = "numpy"
    # NumPy has no bfloat16 and no fp8, so those rows are reported as skipped on the interpreter.
    dtypes = ("f32", "f16")

    def name(self) -> str:
        return f"{platform.machine() or 'CPU'} host, polytile interpreter"

    def _dtype(self, dtype: str) -> Any:
        return _NUMPY_DTYPES[dtype]

    def randn(self, shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        return rng.standard_normal(shape, dtype=np.float32).astype(self._dtype(dtype))

    def empty(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        return np.empty(shape, dtype=self._dtype(dtype))

    def fill_nan(self, array: np.ndarray) -> None:
        array.fill(np.nan)

    def programs(self) -> int:
        return os.cpu_count() or 1

    def row_stride(self, array: np.ndarray) -> int:
        return array.strides[0] // array.itemsize

    def host(self, array: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        return np.array(array if rows is None else array[rows], dtype=np.float32)

    def synchronize(self) -> None:
        pass

    def time_ms(self, fn: Callable[[], None], plan: TimingPlan) -> list[float]:
        start = time.perf_counter()
        fn()
        warmup, reps = plan.counts((time.perf_counter() - start) * 1e3)
        for _ in range(warmup - 1):
            fn()
        samples = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1e3)
        return samples

    def copy_bandwidth_gbs(self, size_class: str) -> float:
        n = (1 << 22) if size_class == "tiny" else (1 << 28)
        src = np.ones(n, dtype=np.uint8)
        dst = np.empty_like(src)
        samples = self.time_ms(lambda: np.copyto(dst, src), TIMING_PLANS[size_class])
        return 2 * n / (statistics.median(samples) * 1e-3) / 1e9

    def versions(self) -> dict[str, str]:
        return {"numpy": np.__version__}


class TorchCudaDevice(Device):
    backend = "nvidia"
    library = "torch"
    dtypes = ("f32", "f16", "bf16")
    # Larger than the L2 of any current GPU (50 MB on H100, 60 MB on H200).
    L2_FLUSH_BYTES = 256 << 20

    def __init__(self) -> None:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch cannot use a CUDA GPU here (torch.cuda.is_available() is False)")
        self.torch = torch
        self.cuda = torch.device("cuda", torch.cuda.current_device())
        self._torch_dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
        if hasattr(torch, "float8_e4m3fn"):
            self._torch_dtypes["e4m3"] = torch.float8_e4m3fn
        self.dtypes = tuple(self._torch_dtypes)
        self._flush_buffer = torch.empty(self.L2_FLUSH_BYTES, dtype=torch.int8, device=self.cuda)

    def name(self) -> str:
        return self.torch.cuda.get_device_name(self.cuda)

    def randn(self, shape: tuple[int, ...], dtype: str, seed: int) -> Any:
        generator = self.torch.Generator(device=self.cuda).manual_seed(seed)
        values = self.torch.randn(shape, generator=generator, dtype=self.torch.float32, device=self.cuda)
        return values.to(self._torch_dtypes[dtype])

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self.torch.empty(shape, dtype=self._torch_dtypes[dtype], device=self.cuda)

    def fill_nan(self, array: Any) -> None:
        array.fill_(float("nan"))

    def programs(self) -> int:
        return self.torch.cuda.get_device_properties(self.cuda).multi_processor_count

    def row_stride(self, array: Any) -> int:
        return array.stride(0)

    def host(self, array: Any, rows: np.ndarray | None = None) -> np.ndarray:
        if array.element_size() == 1:  # fp8: converted first, for the indexing below
            array = array.float()
        if rows is not None:
            array = array[self.torch.as_tensor(rows, device=array.device)]
        return array.float().cpu().numpy()

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()

    def time_ms(self, fn: Callable[[], None], plan: TimingPlan) -> list[float]:
        torch = self.torch
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            self._flush_buffer.zero_()
            fn()
        end.record()
        torch.cuda.synchronize()
        warmup, reps = plan.counts(start.elapsed_time(end) / 5)
        for _ in range(warmup):
            fn()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            # Every launch reads its inputs from memory, not from what the last one left in
            # L2; the flush also keeps the GPU busy while the host enqueues the launch, so
            # the events time the kernel and not the host's launch overhead.
            self._flush_buffer.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def copy_bandwidth_gbs(self, size_class: str) -> float:
        n = 1 << 30
        src = self.torch.ones(n, dtype=self.torch.uint8, device=self.cuda)
        dst = self.torch.empty_like(src)
        samples = self.time_ms(lambda: dst.copy_(src), TIMING_PLANS[size_class])
        return 2 * n / (statistics.median(samples) * 1e-3) / 1e9

    def versions(self) -> dict[str, str]:
        return {"torch": self.torch.__version__, "cuda": str(self.torch.version.cuda), "numpy": np.__version__}


def open_device(backend: str) -> Device:
    """The device for polytile backend ``backend`` ("interp" or "nvidia")."""
    if backend == "interp":
        return NumpyDevice()
    if backend == "nvidia":
        try:
            return TorchCudaDevice()
        except ImportError:
            raise RuntimeError("benchmarking on an NVIDIA GPU needs torch (with CUDA) for the arrays; "
                               "it could not be imported") from None
    raise ValueError(f"no benchmark device for target backend {backend!r}; use 'nvidia' or 'interp'")
