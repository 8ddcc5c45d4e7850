"""Sources: finding, decoding and chunking what an export root holds (BSL modules, metadata
descriptors, markdown docs)."""
