"""One module per command: each is a plain function the CLI (bundler.cli) and the library call."""
