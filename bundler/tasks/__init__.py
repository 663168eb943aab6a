"""Task apps: the pre- and post-processing of image classification, object detection and
streaming audio, the same in Python (here) as in the browser (web/tasks/*.mjs); see spec.py.
Each task kind is a module of kinds/ (see kinds/registry.py), which wires these together."""
