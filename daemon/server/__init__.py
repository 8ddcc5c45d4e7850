"""The daemon process: its socket server, the wire protocol and where a root's daemon lives."""
