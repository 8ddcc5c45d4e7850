"""Ranking: a query's cues, its channels, their weights and RRF fusion into hits."""
