"""1C text: name folding, the BSL-aware tokenizer, the cross-lingual lexicon."""
