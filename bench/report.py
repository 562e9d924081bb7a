"""Results: what one measurement holds, the table, the JSON and the plot."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

OK, MISMATCH, ERROR, SKIPPED = "ok", "mismatch", "error", "skipped"

#: Metrics where a larger number is better; the others are times.
RATES = ("GB/s", "TFLOP/s")

JSON_SCHEMA = 1

#: Lines of a failure's message shown under the table: enough for a compile error's
#: message, source line and caret.
NOTE_LINES = 3


@dataclass
class Measurement:
    """One compiler's result for one row.

    ``status`` is ``ok`` (checked, then timed: ``value`` in the row's metric, ``ms`` the
    median time), ``mismatch`` (the result was wrong, so it was not timed), ``error``
    (it did not compile or launch) or ``skipped`` (it cannot run here); ``detail`` says
    what went wrong, in words.  A value measured in several fresh processes (the launch
    mode) is their median; ``low`` and ``high`` are the fastest and slowest process, and
    ``processes`` what each reported.  A value timed in interleaved rounds (the memory
    and matmul modes, :class:`~.devices.TimingPlan`) is the median of ``rounds``, each
    round's value in the order run.
    """

    status: str
    value: float | None = None
    ms: float | None = None
    samples: int = 0
    detail: str = ""
    low: float | None = None
    high: float | None = None
    processes: list[dict[str, Any]] = field(default_factory=list)
    rounds: list[float] = field(default_factory=list)

    @classmethod
    def failed(cls, status: str, detail: str) -> Measurement:
        return cls(status, detail=detail)


@dataclass
class Row:
    mode: str  # memory, matmul, launch, compile
    kernel: str
    dtype: str
    size: str
    shape: list[int]
    metric: str  # GB/s, TFLOP/s, us/launch, ms
    results: dict[str, Measurement] = field(default_factory=dict)  # "polytile", "triton", "torch"

    def ratio(self, other: str = "triton") -> float | None:
        """polytile's speed over ``other``'s (Triton's, or torch's): above 1, polytile is faster."""
        ours, theirs = self.results.get("polytile"), self.results.get(other)
        if ours is None or theirs is None or ours.status != OK or theirs.status != OK:
            return None
        if not ours.value or not theirs.value:
            return None
        return ours.value / theirs.value if self.metric in RATES else theirs.value / ours.value

    def percent_of_copy(self, copy_gbs: float | None) -> float | None:
        ours = self.results.get("polytile")
        if self.metric != "GB/s" or not copy_gbs or ours is None or ours.status != OK or ours.value is None:
            return None
        return 100.0 * ours.value / copy_gbs

    def problems(self) -> list[tuple[str, Measurement]]:
        return [(name, m) for name, m in self.results.items() if m.status in (MISMATCH, ERROR)]


@dataclass
class Report:
    meta: dict[str, Any]
    rows: list[Row] = field(default_factory=list)

    @property
    def copy_gbs(self) -> float | None:
        return self.meta.get("copy_bandwidth_gbs")

    def failed(self) -> bool:
        return any(row.problems() for row in self.rows)

    def to_json(self) -> dict[str, Any]:
        rows = []
        for row in self.rows:
            item = asdict(row)
            for result in item["results"].values():
                # Only a value measured across processes has a spread: other rows stay as they were.
                for key in ("low", "high", "processes", "rounds"):
                    if not result[key]:
                        del result[key]
            item["ratio"] = row.ratio()
            if "torch" in row.results:
                item["ratio_to_torch"] = row.ratio("torch")
            item["percent_of_copy"] = row.percent_of_copy(self.copy_gbs)
            rows.append(item)
        return {"schema": JSON_SCHEMA, "meta": self.meta, "rows": rows}

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if value >= 0.01 else f"{value:.2e}"


def _cell(m: Measurement | None, metric: str, notes: dict[str, int], where: str) -> str:
    if m is None:
        return "-"
    if m.status == OK and m.value is not None:
        if m.low is not None and m.high is not None:
            return f"{_number(m.value)} {metric} ({_number(m.low)}-{_number(m.high)})"
        return f"{_number(m.value)} {metric}"
    # Skips share one note (every bf16 row on the interpreter); failures each get their own.
    # An internal compiler error runs to many lines: the table keeps the first, the JSON all.
    detail = m.detail.splitlines() or [""]
    if len(detail) > NOTE_LINES:
        more = len(detail) - NOTE_LINES
        detail = [*detail[:NOTE_LINES], f"({more} more lines: --json keeps the whole message)"]
    text = "\n    ".join(detail)
    note = f"{m.status}: {text}" if m.status == SKIPPED else f"{where}: {m.status}: {text}"
    number = notes.setdefault(note, len(notes) + 1)
    return f"{m.status.upper()} [{number}]"


def format_header(meta: dict[str, Any]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items())
    title = f"polytile benchmarks on {meta.get('device', '?')} (target {meta.get('target', '?')}), {meta.get('date', '?')}"
    lines = [title, f"versions: {versions}"]
    if meta.get("copy_bandwidth_gbs"):
        lines.append(f"device copy bandwidth: {_number(meta['copy_bandwidth_gbs'])} GB/s "
                     f"(bytes read + written by {meta.get('copy_method', 'a copy')})")
    return "\n".join(lines)


def format_table(report: Report) -> str:
    """The results as an aligned text table, with numbered notes for every failure."""
    # The vendor libraries' column (torch: cuBLAS, SDPA) only where some row has it.
    vendor = any("torch" in row.results for row in report.rows)
    header = ("kernel", "dtype", "size", "polytile", "triton", "ratio", *(("torch", "vs torch") if vendor else ()),
              "% copy BW")
    notes: dict[str, int] = {}
    lines = []
    for row in report.rows:
        where = f"{row.kernel} {row.dtype} {row.size}"
        ratio = row.ratio()
        percent = row.percent_of_copy(report.copy_gbs)
        extra: tuple[str, ...] = ()
        if vendor:
            versus = row.ratio("torch")
            extra = (_cell(row.results["torch"], row.metric, notes, f"{where} torch") if "torch" in row.results
                     else "-", f"{versus:.2f}x" if versus is not None else "-")
        lines.append((row.kernel, row.dtype, row.size,
                      _cell(row.results.get("polytile"), row.metric, notes, f"{where} polytile"),
                      _cell(row.results.get("triton"), row.metric, notes, f"{where} triton"),
                      f"{ratio:.2f}x" if ratio is not None else "-", *extra,
                      f"{percent:.0f}%" if percent is not None else "-"))
    widths = [max(len(str(line[i])) for line in [header, *lines]) for i in range(len(header))]
    left = {0, 1, 2}

    def render(line: tuple[str, ...]) -> str:
        cells = [str(c).ljust(w) if i in left else str(c).rjust(w) for i, (c, w) in enumerate(zip(line, widths))]
        return "  ".join(cells).rstrip()

    out = [format_header(report.meta), "", render(header), render(tuple("-" * w for w in widths))]
    out += [render(line) for line in lines]
    out.append("")
    out.append("ratio: polytile's speed over Triton's (above 1: polytile is faster); "
               + ("vs torch: polytile's over torch's (cuBLAS for the matmul, SDPA's flash backend for attention); "
                  if vendor else "") + "% copy BW: polytile's GB/s over the device copy bandwidth")
    if any(m.low is not None for row in report.rows for m in row.results.values()):
        out.append("launch: the median of fresh processes, each with an empty cache (fastest-slowest in brackets)")
        # How polytile's timed launches went (native dispatcher or Python, and why): a
        # slow row says in the text itself whether it left the fast path.
        for row in report.rows:
            ours = row.results.get("polytile")
            if ours is not None and ours.status == OK and ours.processes and ours.detail:
                out.append(f"{row.kernel}, polytile: {ours.detail}")
    rounds = max((len(m.rounds) for row in report.rows for m in row.results.values()), default=0)
    if rounds > 1:
        out.append(f"each rate: the median of {rounds} rounds that time the compilers of a row in turn")
    for note, number in notes.items():
        out.append(f"[{number}] {note}")
    return "\n".join(out)


def plot(report: Report, path: Path) -> None:
    """One panel per kernel and dtype: the rate against the size, for each compiler."""
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("--plot needs matplotlib, which is not installed (pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[tuple[str, str], list[Row]] = {}
    for row in report.rows:
        if row.metric in RATES:
            panels.setdefault((row.kernel, row.dtype), []).append(row)
    if not panels:
        raise RuntimeError("nothing to plot: --plot draws the memory and matmul modes, and none of them ran")
    columns = min(3, len(panels))
    lines = -(-len(panels) // columns)
    figure, axes = plt.subplots(lines, columns, figsize=(5 * columns, 3.5 * lines), squeeze=False)
    for ax, ((kernel, dtype), rows) in zip(axes.flat, panels.items()):
        labels = [row.size for row in rows]
        for compiler, color in (("polytile", "tab:blue"), ("triton", "tab:orange")):
            values = [row.results[compiler].value if compiler in row.results and row.results[compiler].status == OK
                      else None for row in rows]
            if any(v is not None for v in values):
                ax.plot(labels, [float("nan") if v is None else v for v in values], marker="o", label=compiler,
                        color=color)
        if rows[0].metric == "GB/s" and report.copy_gbs:
            ax.axhline(report.copy_gbs, linestyle="--", color="grey", label="copy bandwidth")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{kernel} {dtype}")
        ax.set_ylabel(rows[0].metric)
        ax.tick_params(axis="x", labelrotation=30)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    figure.suptitle(f"{report.meta.get('device', '')} {report.meta.get('date', '')}")
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    figure.savefig(path, dpi=120)
    plt.close(figure)
