"""Enough of PNG to count pixels in a browser's screenshot (8-bit RGB or RGBA, not interlaced)."""

from __future__ import annotations

import struct
import zlib


def decode(data: bytes) -> tuple[int, int, list[bytes]]:
    """``(width, height, rows)``: each row ``width * 4`` bytes of RGBA."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    channels = 4 if color == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    pos = 0
    for _ in range(height):
        kind = raw[pos]
        line = bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = prev[i]
            corner = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 255
        prev = line
        if channels == 3:
            rgba = bytearray()
            for i in range(0, stride, 3):
                rgba += line[i:i + 3] + b"\xff"
            rows.append(bytes(rgba))
        else:
            rows.append(bytes(line))
    return width, height, rows


def ink_share(data: bytes, background: tuple[int, int, int] = (255, 255, 255),
              tolerance: int = 24) -> float:
    """The share of pixels that differ from ``background`` by more than ``tolerance``."""
    width, height, rows = decode(data)
    ink = 0
    for row in rows:
        for i in range(0, len(row), 4):
            if max(abs(row[i] - background[0]), abs(row[i + 1] - background[1]),
                   abs(row[i + 2] - background[2])) > tolerance:
                ink += 1
    return ink / max(1, width * height)


def colour_share(data: bytes, colour: tuple[int, int, int], tolerance: int = 40) -> float:
    """The share of pixels within ``tolerance`` of ``colour`` (the red of a drawn cycle)."""
    width, height, rows = decode(data)
    hits = 0
    for row in rows:
        for i in range(0, len(row), 4):
            if max(abs(row[i] - colour[0]), abs(row[i + 1] - colour[1]),
                   abs(row[i + 2] - colour[2])) <= tolerance:
                hits += 1
    return hits / max(1, width * height)
