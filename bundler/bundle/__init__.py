"""The bundle format's one owner: the folder layout (layout.py), bundle.json (manifest.py, its
sub-records in records.py) and edge.json (edge.py), read and written only here (codec.py)."""
