#!/usr/bin/env python3
"""Writes fuzz/seeds-image/jpeg_exif_*.jpg: tests/fixtures/images/jpeg_rgb420.jpg
with an APP1 "Exif" segment after SOI, behind fuzz_image's mode byte (0x03: the
image path, composited over white, fixture processor 3). Python stdlib only.
  jpeg_exif_orient6.jpg    well-formed: big-endian IFD0, Orientation 6 (SHORT)
  jpeg_exif_malformed.jpg  little-endian IFD0 declaring 0xffff entries of which
                           three are present: an Orientation with count 2^30 and
                           a value offset past the end, one with offset
                           0xfffffff0, then Orientation 5; the block then ends
                           in the middle of an entry.
Run from the repo root: python3 tools/gen_exif_seeds.py"""
import struct

SRC = "tests/fixtures/images/jpeg_rgb420.jpg"


def tiff(be, ifd_off, declared, entries, cut=0):
    e = ">" if be else "<"
    out = (b"MM\x00\x2a" if be else b"II\x2a\x00") + struct.pack(e + "I", ifd_off)
    out += struct.pack(e + "H", declared)
    for tag, typ, count, value in entries:
        if typ == 3 and count == 1:
            val = struct.pack(e + "HH", value, 0)
        else:
            val = struct.pack(e + "I", value)
        out += struct.pack(e + "HHI", tag, typ, count) + val
    return out + b"\x12\x01\x03\x00"[:cut]


def with_app1(jpg, block):
    seg = b"Exif\x00\x00" + block
    return jpg[:2] + b"\xff\xe1" + struct.pack(">H", len(seg) + 2) + seg + jpg[2:]


jpg = open(SRC, "rb").read()
good = tiff(True, 8, 1, [(0x0112, 3, 1, 6)])
bad = tiff(False, 8, 0xFFFF, [(0x0112, 3, 1 << 30, 0xFFFFFF00), (0x0112, 4, 3, 0xFFFFFFF0), (0x0112, 3, 1, 5)], cut=4)
for name, block in (("jpeg_exif_orient6.jpg", good), ("jpeg_exif_malformed.jpg", bad)):
    with open("fuzz/seeds-image/" + name, "wb") as f:
        f.write(b"\x03" + with_app1(jpg, block))
