"""The Typer command line: one module per subcommand, shared options in :mod:`options`."""
