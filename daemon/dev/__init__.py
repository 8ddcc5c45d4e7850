"""Developer tooling shipped with the package: benches and the gold-set evaluation."""
