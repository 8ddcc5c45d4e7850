"""The index: the chunk store, its channels (BM25, names, metadata names, dense), the embedding
cache, reconcile with the disk and snapshots."""
