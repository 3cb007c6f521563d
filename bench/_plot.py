"""A line chart as a PNG, with the standard library only (zlib + struct).

The benches need one kind of picture (a few series over time, with threshold lines), and
pulling in matplotlib for that would be the heaviest dependency of the project. This
draws on an RGB raster with Bresenham lines and a 3x5 pixel font, and encodes it as an
8-bit truecolor PNG.
"""

from __future__ import annotations

import itertools
import math
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

Color = tuple[int, int, int]
WHITE: Color = (255, 255, 255)
BLACK: Color = (20, 20, 20)
GREY: Color = (120, 120, 120)
PALETTE: tuple[Color, ...] = ((214, 39, 40), (255, 127, 14), (31, 119, 180), (44, 160, 44))

# 3x5 glyphs, rows top to bottom, "1" = ink.
_FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111",
    "3": "111001111001111", "4": "101101111001001", "5": "111100111001111",
    "6": "111100111101111", "7": "111001010010010", "8": "111101111101111",
    "9": "111101111001111", "A": "010101111101101", "B": "110101110101110",
    "C": "011100100100011", "D": "110101101101110", "E": "111100110100111",
    "F": "111100110100100", "G": "011100101101011", "H": "101101111101101",
    "I": "111010010010111", "J": "001001001101010", "K": "101101110101101",
    "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "010101101101010", "P": "110101110100100", "Q": "010101101110011",
    "R": "110101110101101", "S": "011100010001110", "T": "111010010010010",
    "U": "101101101101111", "V": "101101101101010", "W": "101101111111101",
    "X": "101101010101101", "Y": "101101010010010", "Z": "111001010100111",
    " ": "000000000000000", ".": "000000000000010", ",": "000000000010100",
    ":": "000010000010000", "-": "000000111000000", "+": "000010111010000",
    "/": "001001010100100", "(": "010100100100010", ")": "010001001001010",
    "=": "000111000111000", "%": "101001010100101", "_": "000000000000111",
    "<": "001010100010001", ">": "100010001010100",
}  # fmt: skip


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


class Canvas:
    """An RGB raster with just the drawing operations a line chart needs."""

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray(bytes(WHITE) * (width * height))

    def dot(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            offset = 3 * (y * self.width + x)
            self.pixels[offset : offset + 3] = bytes(color)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        for y in range(max(0, y0), min(self.height, y1 + 1)):
            for x in range(max(0, x0), min(self.width, x1 + 1)):
                self.dot(x, y, color)

    def line(
        self, x0: int, y0: int, x1: int, y1: int, color: Color, thick: int = 1, dash: int = 0
    ) -> None:
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err, step = dx + dy, 0
        while True:
            if not dash or (step // dash) % 2 == 0:
                for ox in range(thick):
                    for oy in range(thick):
                        self.dot(x0 + ox, y0 + oy, color)
            if x0 == x1 and y0 == y1:
                return
            doubled = 2 * err
            if doubled >= dy:
                err += dy
                x0 += sx
            if doubled <= dx:
                err += dx
                y0 += sy
            step += 1

    def text(self, x: int, y: int, text: str, color: Color = BLACK, scale: int = 2) -> int:
        """Draw upper-cased ``text``; returns the x after it."""
        for char in text.upper():
            glyph = _FONT.get(char, _FONT[" "])
            for index, bit in enumerate(glyph):
                if bit == "1":
                    row, col = divmod(index, 3)
                    self.rect(
                        x + col * scale,
                        y + row * scale,
                        x + (col + 1) * scale - 1,
                        y + (row + 1) * scale - 1,
                        color,
                    )
            x += 4 * scale
        return x

    def png(self) -> bytes:
        stride = 3 * self.width
        raw = b"".join(
            b"\x00" + bytes(self.pixels[row * stride : (row + 1) * stride])
            for row in range(self.height)
        )
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(raw, 9))
            + _chunk(b"IEND", b"")
        )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def nice_step(span: float, ticks: int = 6) -> float:
    """A 1/2/5 x 10^k tick step giving about ``ticks`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _label(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.1f}"


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
    """Write a PNG line chart of ``series`` (shared axes, legend at the top) to ``path``."""
    canvas = Canvas(width, height)
    left, right, top, bottom = 80, width - 20, 90, height - 50
    xs = [x for s in series for x in s.xs] or [0.0, 1.0]
    ys = [y for s in series for y in s.ys] + [h.y for h in hlines] or [0.0, 1.0]
    x_max = max(xs) or 1.0
    y_step = nice_step(max(ys) or 1.0)
    y_max = y_step * math.ceil((max(ys) or 1.0) / y_step)
    x_step = nice_step(x_max)

    def px(x: float) -> int:
        return left + round((right - left) * x / x_max)

    def py(y: float) -> int:
        return bottom - round((bottom - top) * y / y_max)

    canvas.text(left, 12, title, scale=3)
    tick = 0.0
    while tick <= y_max + 1e-9:
        canvas.line(left, py(tick), right, py(tick), (235, 235, 235))
        label = _label(tick)
        canvas.text(left - 8 - 8 * len(label), py(tick) - 5, label)
        tick += y_step
    tick = 0.0
    while tick <= x_max + 1e-9:
        label = _label(tick)
        canvas.line(px(tick), bottom, px(tick), bottom + 5, BLACK)
        canvas.text(px(tick) - 4 * len(label), bottom + 10, label)
        tick += x_step
    canvas.line(left, top, left, bottom, BLACK, thick=2)
    canvas.line(left, bottom, right, bottom, BLACK, thick=2)
    canvas.text((left + right) // 2 - 4 * len(x_label), bottom + 28, x_label)
    canvas.text(8, top - 20, y_label)
    for hline in hlines:
        canvas.line(left, py(hline.y), right, py(hline.y), hline.color, dash=6)
        canvas.text(left + 8, py(hline.y) - 14, hline.label, hline.color)
    for item in series:
        points = [(px(x), py(y)) for x, y in zip(item.xs, item.ys, strict=True)]
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            canvas.line(x0, y0, x1, y1, item.color, thick=2)
    legend_x = left
    for item in series:
        canvas.rect(legend_x, 44, legend_x + 14, 54, item.color)
        legend_x = canvas.text(legend_x + 20, 44, item.label, item.color) + 24
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canvas.png())
    return path
