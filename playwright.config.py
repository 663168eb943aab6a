"""Browser settings for `bundle test`, the build-time verification and the test suite.

This file is the one place for them: which Chromium to launch, its flags, timeouts and the
per-execution-provider tolerances of the browser against native onnxruntime
(bundler/verify/tolerance.py reads them; it holds the tolerances of the native comparisons).
`bundler.verify.browser.load_settings()` reads it; set BUNDLER_PLAYWRIGHT_CONFIG to use another
file of the same shape.
"""

# The Chromium to launch: $BUNDLER_CHROMIUM when set, else the first of these that exists, else the
# browser of `playwright install` (which needs a download this machine may not be allowed).
CHROMIUM_ENV = "BUNDLER_CHROMIUM"
CHROMIUM_CANDIDATES = [
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
    "/usr/bin/google-chrome-stable",
]

# Keeps headless Chromium from calling home (a closed network refuses those calls, noisily).
BASE_ARGS = [
    "--no-sandbox",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
]

# WebGPU without a GPU, through SwiftShader: slow (seconds per run) but correct. Without these
# flags headless Chromium has no WebGPU adapter, which is how the WASM fallback is tested.
WEBGPU_ARGS = [
    "--enable-unsafe-webgpu",
    "--enable-features=Vulkan",
    "--use-vulkan=swiftshader",
    "--use-webgpu-adapter=swiftshader",
    "--disable-vulkan-surface",
]

TIMEOUTS_MS = {
    "launch": 60_000,
    "load": 180_000,  # runtime import + model fetch + session creation
    "run": 300_000,  # one inference; SwiftShader WebGPU is slow on large models
}

# Browser vs native onnxruntime (CPU): |browser - native| <= atol + rtol * |native|.
TOLERANCES = {
    "wasm": {"atol": 1e-4, "rtol": 1e-3},
    "webgpu": {"atol": 1e-3, "rtol": 1e-2},
}

# Quantized variants (fp16, int8, int4) are compared relative to each output's range instead:
# dynamic int8 rounds its scales differently in WASM and on x86 (about 1 % of the range apart on
# the same file), so elementwise tolerances would fail a variant that computes correctly.
QUANTIZED_TOLERANCES = {
    "wasm": {"range_fraction": 0.02},
    "webgpu": {"range_fraction": 0.03},
}
