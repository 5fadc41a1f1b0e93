"""Subcommands of the msdoctor CLI, one module each."""
