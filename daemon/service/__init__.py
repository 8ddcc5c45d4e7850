"""The per-root service: the engine kept fresh by the writer, dense and watcher threads."""
