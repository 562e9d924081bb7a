"""Triton's tutorial 09 descriptor matmuls (``bench/triton_descriptor_matmuls.py``, written
against Triton's API) run by Triton and, with only the imports changed, by polytile: fp16
TFLOP/s at 4096³ and 8192³ on one GPU, in interleaved rounds, each output checked against
torch.  Run: ``python -m bench.descriptor_tutorial`` (needs a Hopper GPU, torch, Triton
and polytile-tma)."""
import importlib.util
import statistics

import torch
import triton
import triton.testing

from tests.plugins.tma.test_tutorial_port import SOURCE, ported

spec = importlib.util.spec_from_file_location("triton_descriptor_matmuls", SOURCE)
original = importlib.util.module_from_spec(spec)
spec.loader.exec_module(original)
NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count


def alloc(size, alignment, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


#: label -> (the host function, its extra arguments, its keyword arguments).  "ws": the
#: tutorial's WARP_SPECIALIZE=True; "flat": FLATTEN (the tutorial itself sets it False
#: with warp specialization on Hopper).
VARIANTS = {
    "matmul_tma": ("matmul_tma", (), {}),
    "matmul_tma ws": ("matmul_tma", (), {"warp_specialize": True}),
    "matmul_tma_persistent": ("matmul_tma_persistent", (NUM_SMS,), {}),
    "matmul_tma_persistent ws": ("matmul_tma_persistent", (NUM_SMS,), {"warp_specialize": True, "flatten": False}),
    "matmul_tma_persistent ws flat": ("matmul_tma_persistent", (NUM_SMS,), {"warp_specialize": True}),
    "matmul_descriptor_persistent": ("matmul_descriptor_persistent", (NUM_SMS, alloc), {}),
    "matmul_descriptor_persistent ws": ("matmul_descriptor_persistent", (NUM_SMS, alloc),
                                        {"warp_specialize": True, "flatten": False}),
}
ROUNDS = 3


def _runs(variant, a, b, c):
    function, extra, keywords = VARIANTS[variant]
    return {"polytile": lambda: getattr(ported(), function)(a, b, c, *extra, **keywords),
            "triton": lambda: getattr(original, function)(a, b, c, *extra, **keywords)}


print(f"{'variant':32s} {'size':>6s} {'polytile':>10s} {'triton':>10s} {'ratio':>6s}")
for size in (4096, 8192):
    torch.manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    expected = a.float() @ b.float().T
    for variant in VARIANTS:
        rates = {"polytile": [], "triton": []}
        c = torch.empty(size, size, device="cuda", dtype=torch.float16)
        runs = _runs(variant, a, b, c)
        for name, run in list(runs.items()):  # tune, compile, check
            c.fill_(float("nan"))
            try:
                run()
                torch.testing.assert_close(c.float(), expected, atol=0.5, rtol=0.05)
            except Exception as error:  # a compiler that cannot run the variant: its column says so
                print(f"{variant:32s} {size:6d} {name}: {type(error).__name__}: {str(error).splitlines()[0][:120]}")
                del runs[name]
        for _ in range(ROUNDS):
            for name, run in runs.items():
                ms = triton.testing.do_bench(run, warmup=25, rep=200)
                rates[name].append(2 * size ** 3 / ms / 1e9)
        p, t = (statistics.median(rates[name]) if rates[name] else float("nan") for name in ("polytile", "triton"))
        print(f"{variant:32s} {size:6d} {p:7.0f} TF {t:7.0f} TF {p / t:5.2f}x")
