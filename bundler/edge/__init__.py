"""The edge target: `bundle build --target edge` (ORT-format models, edge.json) and native
onnxruntime over an execution-provider priority list (`bundle run`, edge apps)."""
