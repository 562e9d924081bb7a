"""Flash attention forward over block configurations: polytile and Triton on the same
source and the same configuration, side by side in one process on one GPU, so that a
ratio at one configuration is never mistaken for a ratio of the best each can do.

Run: ``python -m bench.attention_configs`` (needs an NVIDIA GPU, torch, Triton and, for
the descriptor kernels, polytile-tma and polytile-warpspec).  Each row is checked
against torch's ``scaled_dot_product_attention`` before it is timed; the timed rounds
take every row in turn (``--rounds``, medians), as ``python -m bench`` does.  The last
lines name each tool's fastest configuration per (head dim, kernel, causal).  A
configuration one tool cannot compile or launch (more shared memory than the GPU has)
shows why in the row's note; the exit status is 1 only for a wrong result.

Kernels: ``pointer`` (examples/flash_attention.py's kernel), ``descriptor`` (the same
through descriptors made in the kernel, Triton's tutorial 06 on Hopper),
``descriptor_ws`` (that one with ``warp_specialize=True``; Triton's own
warp-specialised pipeline beside it) and ``descriptor_ws_overlap`` (polytile with
``warp_specialize=pl.WarpSpecialize(overlap=True)``: FlashAttention-3's overlap of the
softmax with the previous ``p @ v``; Triton beside it with ``warp_specialize=True``, the
nearest it has).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import asdict, dataclass

#: (BLOCK_M, BLOCK_N, num_warps, num_stages) per head dim, each timed for every kernel.
CONFIGS = {
    64: ((128, 64, 4, 3), (128, 128, 8, 3), (128, 128, 4, 2)),
    128: ((128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3)),
}
KERNELS = ("pointer", "descriptor", "descriptor_ws", "descriptor_ws_overlap")


@dataclass(frozen=True)
class Row:
    head_dim: int
    kernel: str
    causal: bool
    config: tuple[int, int, int, int]
    polytile: float | None  # TFLOP/s, None where it did not compile, run or check
    triton: float | None
    note: str = ""


def run(batch: int = 4, heads: int = 32, seq_len: int = 4096, head_dims: tuple[int, ...] = (64, 128),
        kernels: tuple[str, ...] = KERNELS, rounds: int = 3) -> list[Row]:
    import torch
    import triton

    import polytile as pt

    from . import polytile_kernels, triton_kernels
    from .devices import TIMING_PLANS, TorchCudaDevice

    device = TorchCudaDevice()

    def scratch(size: int, alignment: int, stream: object) -> object:
        return torch.empty(size, dtype=torch.int8, device="cuda")

    pt.set_allocator(scratch)
    triton.set_allocator(scratch)
    rows = batch * heads * seq_len
    plan = TIMING_PLANS["full"]
    launches: dict = {}
    notes: dict = {}
    for head_dim in head_dims:
        q, k, v = (device.randn((rows, head_dim), "f16", seed) for seed in (11, 12, 13))
        out = device.empty((rows, head_dim), "f16")
        shape = (batch, heads, seq_len, head_dim)
        for causal in (False, True):
            expected = torch.nn.functional.scaled_dot_product_attention(
                q.view(shape), k.view(shape), v.view(shape), is_causal=causal).view(rows, head_dim).float()
            for kernel in kernels:
                for config in CONFIGS[head_dim]:
                    key = (head_dim, kernel, causal, config)
                    for tool, lib in (("polytile", polytile_kernels), ("triton", triton_kernels)):
                        launch = _launcher(lib, kernel, q, k, v, out, seq_len, batch * heads, head_dim, causal, config)
                        try:
                            out.zero_()
                            launch()
                            torch.cuda.synchronize()
                            error = (out.float() - expected).abs().max().item()
                        except Exception as failure:  # noqa: BLE001 (reported in the table, the sweep goes on)
                            # Such as a configuration that needs more shared memory than the GPU has.
                            notes.setdefault(key, []).append(
                                f"{tool}: {type(failure).__name__}: {str(failure).splitlines()[0][:120]}")
                            continue
                        if not error <= 2e-2:
                            notes.setdefault(key, []).append(f"{tool}: wrong result (max error {error:.3g})")
                            continue
                        launches[key + (tool,)] = launch
    times: dict = {key: [] for key in launches}
    for _ in range(rounds):
        for key, launch in launches.items():
            times[key].extend(device.time_ms(launch, plan))
    result = []
    seen = sorted({key[:4] for key in launches} | set(notes), key=lambda k: (k[0], KERNELS.index(k[1]), k[2], k[3]))
    for key in seen:
        head_dim, kernel, causal, config = key
        flops = 4 * batch * heads * seq_len * seq_len * head_dim / (2 if causal else 1)
        rate = {tool: flops / statistics.median(times[key + (tool,)]) / 1e9 if key + (tool,) in times else None
                for tool in ("polytile", "triton")}
        result.append(Row(head_dim, kernel, causal, config, rate["polytile"], rate["triton"],
                          "; ".join(notes.get(key, ()))))
    return result


def _launcher(lib, kernel, q, k, v, out, seq_len, heads, head_dim, causal, config):  # noqa: ANN001, ANN202
    block_m, block_n, warps, stages = config
    grid = (math.ceil(seq_len / block_m), heads)
    scale = 1.0 / math.sqrt(head_dim)
    if kernel == "pointer":
        return lambda: lib.attention_kernel[grid](q, k, v, out, scale, seq_len, HEAD_DIM=head_dim, BLOCK_M=block_m,
                                                  BLOCK_N=block_n, CAUSAL=causal, num_warps=warps, num_stages=stages)
    ws = kernel != "descriptor"
    if kernel == "descriptor_ws_overlap" and lib.__name__.endswith("polytile_kernels"):
        import polytile.language as pl

        ws = pl.WarpSpecialize(overlap=True)
    return lambda: lib.attention_descriptor_kernel[grid](
        q, k, v, out, scale, seq_len, heads * seq_len, HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n,
        CAUSAL=causal, WS=ws, num_warps=warps, num_stages=stages)


def format_rows(rows: list[Row]) -> str:
    def rate(value: float | None) -> str:
        return f"{value:8.0f}" if value is not None else "       -"

    lines = [f"{'d':>3}  {'kernel':14} {'causal':6} {'BMxBNxWxS':13} {'polytile':>8} {'triton':>8}  ratio"]
    for row in rows:
        ratio = f"{row.polytile / row.triton:5.2f}x" if row.polytile and row.triton else "     -"
        lines.append(f"{row.head_dim:>3}  {row.kernel:14} {str(row.causal):6} {'x'.join(map(str, row.config)):13} "
                     f"{rate(row.polytile)} {rate(row.triton)}  {ratio}  {row.note}".rstrip())
    lines.append("")
    lines.append("fastest configuration of each (TFLOP/s):")
    groups = sorted({(r.head_dim, r.kernel, r.causal) for r in rows}, key=lambda g: (g[0], KERNELS.index(g[1]), g[2]))
    for group in groups:
        members = [r for r in rows if (r.head_dim, r.kernel, r.causal) == group]
        best = {tool: max(((getattr(r, tool), r.config) for r in members if getattr(r, tool)), default=None)
                for tool in ("polytile", "triton")}
        words = [f"{tool} {value:.0f} at {'x'.join(map(str, config))}" for tool, found in best.items() if found
                 for value, config in [found]]
        lines.append(f"  d={group[0]} {group[1]}{' causal' if group[2] else ''}: " + "; ".join(words))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.attention_configs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--head-dims", type=int, nargs="+", default=[64, 128], choices=sorted(CONFIGS))
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    rows = run(head_dims=tuple(args.head_dims), kernels=tuple(args.kernels), rounds=args.rounds)
    print(format_rows(rows))
    if args.json:
        with open(args.json, "w") as file:
            json.dump([asdict(row) for row in rows], file, indent=1)
    return exit_status(rows)


def exit_status(rows: list[Row]) -> int:
    """1 where either tool gave a wrong result in some row (whatever else its note says), else 0."""
    return 1 if any("wrong result" in row.note for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
