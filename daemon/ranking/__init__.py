"""Ranking: a query's cues (:mod:`.cues`), the tuned numbers (:mod:`.params`), its channels,
RRF fusion and hits (:mod:`.ranker`, :mod:`.fusion`), and a documentation search's rules (:mod:`.docs`)."""
