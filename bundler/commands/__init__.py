"""One module per `bundle` command: the plain function behind each click command in cli.py."""
