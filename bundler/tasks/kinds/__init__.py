"""The task kinds by name (see registry.py): one module per kind, each a `KIND = TaskKind(...)`
(see spec.py) that owns the kind's settings, its resolution against the model, its graph, its
Python twin pipeline, its `bundle test` check, its demo and what `bundle run` prints."""
