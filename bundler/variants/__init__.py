"""The variants of a model: one module per kind (fp32.py, fp16.py, int8_weights.py, int8.py,
int8_static.py, int4.py), found by name through registry.py; metrics.py measures a variant
against fp32, budget.py says what is close enough, plan.py says what a build makes and ships,
default.py which variant is the default, select.py makes auto's choice, make.py makes a build's
variants, ort_format.py converts one to .ort.

Adding a kind: a module named after it that defines `KIND = KindSpec(...)` (see spec.py), its
name in kinds.py's Literal, and its tests.

Nothing is imported here, so `bundler.variants.kinds`, `.budget`, `.default` and `.plan` stay free
of onnx and onnxruntime: import from the module that owns a name.
"""
