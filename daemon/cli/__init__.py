"""The ``bsl-lens`` command line: commands, status text, the status page."""
