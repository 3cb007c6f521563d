"""Line charts of the benches as PNG files, drawn by matplotlib (the ``bench`` extra).

The benches need one kind of picture: a few series over time with threshold lines. The
API here (:class:`Series`, :class:`HLine`, :func:`line_chart`) keeps the bench scripts
free of plotting details; matplotlib runs with its file-only ``Agg`` backend, so no
display is needed. matplotlib is imported only to draw: without the extra, a bench asks
:func:`chart_skipped` first, prints its figures and JSON line, and skips the chart with
the note (the figures are the result; the chart only illustrates them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Color = tuple[int, int, int]
GREY: Color = (120, 120, 120)
PALETTE: tuple[Color, ...] = ((214, 39, 40), (255, 127, 14), (31, 119, 180), (44, 160, 44))
INSTALL_HINT = "pip install -e '.[bench]' (matplotlib draws the bench charts)"


@dataclass(frozen=True)
class Series:
    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: Color


@dataclass(frozen=True)
class HLine:
    y: float
    label: str
    color: Color = GREY


def chart_skipped() -> str | None:
    """None when charts can be drawn; otherwise the note a bench prints instead of one."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "chart skipped: matplotlib not installed (pip install -e '.[bench]')"
    return None


def _rgb(color: Color) -> tuple[float, float, float]:
    red, green, blue = color
    return red / 255, green / 255, blue / 255


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise RuntimeError(f"cannot draw the chart: {INSTALL_HINT}") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def line_chart(
    path: Path,
    title: str,
    series: Sequence[Series],
    x_label: str,
    y_label: str,
    hlines: Sequence[HLine] = (),
    width: int = 1000,
    height: int = 520,
) -> Path:
    """Write a PNG line chart of ``series`` (shared axes, legend top left) to ``path``;
    ``width`` x ``height`` pixels."""
    plt = _pyplot()
    dpi = 100
    figure, axes = plt.subplots(figsize=(width / dpi, height / dpi), dpi=dpi)
    try:
        for item in series:
            axes.plot(item.xs, item.ys, label=item.label, color=_rgb(item.color), linewidth=1.2)
        for line in hlines:
            axes.axhline(line.y, color=_rgb(line.color), linestyle="--", linewidth=1)
            axes.annotate(
                line.label,
                xy=(1, line.y),
                xycoords=("axes fraction", "data"),
                ha="right",
                va="bottom",
                color=_rgb(line.color),
            )
        axes.set_title(title)
        axes.set_xlabel(x_label)
        axes.set_ylabel(y_label)
        axes.set_xlim(left=0)
        axes.set_ylim(bottom=0)
        axes.grid(True, color="#ebebeb")
        if series:
            axes.legend(loc="upper left", ncol=len(series))
        figure.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png")
    finally:
        plt.close(figure)
    return path
