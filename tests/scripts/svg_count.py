#!/usr/bin/python3
"""svg_count.py FILE [--rects-at-least N] [--circles N]: FILE parses as SVG
and holds at least N rectangles (the figure's bars and boxes) and exactly N
circles (points), where asked."""
import argparse
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("--rects-at-least", type=int, default=0)
ap.add_argument("--circles", type=int)
a = ap.parse_args()
root = ET.parse(a.file).getroot()
rects, circles = len(root.findall(f".//{NS}rect")), len(root.findall(f".//{NS}circle"))
print(f"{a.file}: {rects} rectangles, {circles} circles")
if rects < a.rects_at_least:
    sys.exit(f"fewer than {a.rects_at_least} rectangles")
if a.circles is not None and circles != a.circles:
    sys.exit(f"not {a.circles} circles")
