"""The engine's records, by their older import path: they live in :mod:`daemon.contract`.

Kept so that ``from daemon.model import Chunk`` (tests, scripts) goes on working; new code
imports :mod:`daemon.contract`.
"""

from .contract import CODE_KINDS, METADATA_KINDS, METHOD_KINDS, MODULE_KINDS, Chunk, Filters, Skip

__all__ = ["CODE_KINDS", "METADATA_KINDS", "METHOD_KINDS", "MODULE_KINDS", "Chunk", "Filters", "Skip"]
