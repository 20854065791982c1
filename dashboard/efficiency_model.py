"""The Efficiency page's model: which suites have efficiency metrics at a commit, the reference lines (the
ceilings the benchmarks measured, the datasheet peaks) and the captions. Pure: no Streamlit, no database
(``dashboard/views/efficiency.py`` is the page)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from dashboard import fmt, suites
from settings.gpu import GpuSpec

METRICS = tuple((leaf, title, suites.METRICS[leaf]) for leaf, title in suites.EFFICIENCY.items())  # panels


def metric_suites(names: Sequence[str]) -> list[suites.Suite]:
    """The suites present among benchmark ``names`` that have some efficiency metric there."""
    return [s for s in suites.present_suites(list(names))
            if any(suites.matches(n, f"{s.metrics_class}.{m}") for n in names for m, _, _ in METRICS)]


def peaks(ceil: Mapping[str, float], sheet: GpuSpec | None) -> dict[str, list[tuple[str, float]]]:
    """Reference lines per metric: the roofline, the measured copy and matmul ceilings, the datasheet's."""
    out: dict[str, list[tuple[str, float]]] = {"track_roofline_fraction": [("roofline", 1.0)],
                                               "track_gbps": [], "track_tflops": []}
    if "copy_gbps" in ceil:
        out["track_gbps"].append(("measured copy", ceil["copy_gbps"]))
    if "matmul_tflops" in ceil:
        out["track_tflops"].append(("measured bf16 matmul", ceil["matmul_tflops"]))
    if sheet:
        out["track_gbps"].append(("datasheet", sheet.bandwidth_gbps))
        out["track_tflops"].append(("datasheet bf16 dense", sheet.bf16_tflops))
    return out


def device_caption(info: Mapping[str, Any], ceil: Mapping[str, float], sheet: GpuSpec | None) -> str:
    """The device, the ceilings its benchmarks measured (the roofline's) and its datasheet peaks."""
    gpu = info.get("gpu_name")
    parts = []
    if gpu and gpu != "none":
        parts.append(f"Device: {gpu} (sm {info.get('gpu_cc') or '?'}).")
    if ceil:
        parts.append("Ceilings the benchmarks measured on it and computed the roofline with: copy "
                     f"{fmt.fmt_value(ceil['copy_gbps'], 'GB/s')}"
                     + (f", bf16 matmul {fmt.fmt_value(ceil['matmul_tflops'], 'TFLOP/s')}" if "matmul_tflops" in ceil
                        else " (no case is compute-bound, so the matmul ceiling cannot be read back from the "
                        "results)")
                     + ". Roofline time = max(bytes / copy bandwidth, flops / matmul rate).")
    if sheet:
        parts.append(f"Datasheet peaks ({sheet.name}): {fmt.fmt_value(sheet.bandwidth_gbps, 'GB/s')}, bf16 dense "
                     f"{fmt.fmt_value(sheet.bf16_tflops, 'TFLOP/s')}.")
    return " ".join(parts)


def best_caption(eff: pd.DataFrame, line_param: str) -> str | None:
    """The line and concurrency closest to the roofline, or None without a roofline fraction."""
    roof = eff[eff["metric"] == "track_roofline_fraction"]
    if roof.empty:
        return None
    best = roof.loc[roof["value"].idxmax()]
    return (f"Best: {line_param}={best['line']} at concurrency {int(best['concurrency'])} reaches "
            f"{fmt.fmt_value(best['value'], 'fraction')} of the device's roofline "
            f"({fmt.fmt_ratio(1 / best['value'])} off it).")
