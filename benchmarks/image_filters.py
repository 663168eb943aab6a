"""What each resize filter and letterbox order costs the browser's fitImage per webcam frame.

    python benchmarks/image_filters.py [--frames 60] [--size 1280x720] [--input 320]

Runs web/tasks/image.mjs's fitImage under Node (the same V8 as Chromium) on random RGBA frames
of SIZE, fitted to an INPUT x INPUT letterbox, after a warm-up; prints the median milliseconds a
frame of each setting and its ratio to today's default (bilinear, resize-then-pad).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from bundler.site.npmtools import node_executable

WEB_TASKS = Path(__file__).resolve().parent.parent / "web" / "tasks"
SETTINGS = [("bilinear", "resize-then-pad"), ("nearest", "resize-then-pad"),
            ("antialias", "resize-then-pad"), ("cv2-linear", "resize-then-pad"),
            ("pil-bilinear", "resize-then-pad"), ("bilinear", "pad-then-resize"),
            ("cv2-linear", "pad-then-resize"), ("pil-bilinear", "pad-then-resize")]

SCRIPT = """
import { fitImage } from '%(tasks)s/image.mjs';
const [width, height, size, frames] = process.argv.slice(2).map(Number);
const settings = JSON.parse(process.argv[6]);
const data = new Uint8ClampedArray(width * height * 4);
for (let i = 0; i < data.length; i++) data[i] = (i * 2654435761) >>> 24;
const pixels = { data, width, height };
const medians = [];
for (const [filter, order] of settings) {
  const task = { size: [size, size], resize: 'letterbox', filter, letterbox_order: order,
                 placement: 'top-left', pad_value: 0 };
  for (let i = 0; i < 10; i++) fitImage(pixels, task);
  const times = [];
  for (let i = 0; i < frames; i++) {
    const start = performance.now();
    fitImage(pixels, task);
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  medians.push(times[Math.floor(times.length / 2)]);
}
process.stdout.write(JSON.stringify(medians));
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--size", default="1280x720", help="WIDTHxHEIGHT of a frame")
    parser.add_argument("--input", type=int, default=320, help="the model's square input")
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "bench.mjs"
        script.write_text(SCRIPT % {"tasks": WEB_TASKS.as_uri()}, encoding="utf-8")
        result = subprocess.run([str(node_executable()), str(script), str(width), str(height),
                                 str(args.input), str(args.frames), json.dumps(SETTINGS)],
                                capture_output=True, text=True, check=True, timeout=600)
    medians = json.loads(result.stdout)
    print(f"fitImage, {width}x{height} RGBA -> {args.input}x{args.input}, median of"
          f" {args.frames} frames (Node {node_executable().name})")
    print(f"{'filter':<14}{'letterbox order':<18}{'ms/frame':>10}{'vs default':>12}")
    for (filter_name, order), median in zip(SETTINGS, medians, strict=True):
        print(f"{filter_name:<14}{order:<18}{median:>10.2f}{median / medians[0]:>11.2f}x")


if __name__ == "__main__":
    main()
