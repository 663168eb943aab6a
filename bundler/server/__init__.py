"""Serving a bundle folder over HTTP: for `bundle serve` (live reload), `bundle test` and the
build's browser check."""
