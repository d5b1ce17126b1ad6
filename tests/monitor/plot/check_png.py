#!/usr/bin/env python3
"""Independent reader for plot PNGs (tests/monitor/plot/plot_test.cpp): decodes the file with PIL
(which checks the chunk CRCs and the zlib stream) and, for each colour given as R,G,B, reports
the pixels of exactly that colour: count, bounding box and the correlation of x with -y (a line
rising to the right: +1). Prints JSON."""
import json
import sys

from PIL import Image


def describe(img, rgb):
    w, h = img.size
    px = img.load()
    xs, ys = [], []
    for y in range(h):
        for x in range(w):
            if px[x, y] == rgb:
                xs.append(x)
                ys.append(-y)
    out = {"count": len(xs)}
    if xs:
        out["bbox"] = [min(xs), -max(ys), max(xs), -min(ys)]
        n = len(xs)
        mx, my = sum(xs) / n, sum(ys) / n
        sxy = sum((a - mx) * (b - my) for a, b in zip(xs, ys))
        sxx = sum((a - mx) ** 2 for a in xs)
        syy = sum((b - my) ** 2 for b in ys)
        out["corr"] = sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else 0.0
    return out


def main():
    img = Image.open(sys.argv[1])
    img.load()
    result = {"format": img.format, "mode": img.mode, "width": img.size[0], "height": img.size[1], "colors": {}}
    img = img.convert("RGB")
    for spec in sys.argv[2:]:
        rgb = tuple(int(v) for v in spec.split(","))
        result["colors"][spec] = describe(img, rgb)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
