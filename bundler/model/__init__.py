"""The model itself, before it is a bundle: what it is made of (analysis, inspect's page), the
integer values and symbolic dims its inputs take, which operators each runtime runs, and the
preparation of the browser-ready fp32 file (fit to the runtime, optimise, export from PyTorch)."""
