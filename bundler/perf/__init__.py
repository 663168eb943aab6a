"""Performance measurement: `bundle bench` (browser and native latency, cold start, bytes,
memory, per-operator profiles) and the speed figures `--quantize auto` weighs."""
