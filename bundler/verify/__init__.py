"""Checking a bundle: native onnxruntime's reference outputs on seeded or user inputs, headless
Chromium, the browser-vs-native comparison, the one tolerance policy, the sizes a bundle is
measured at, and the one definition of "verified"."""
