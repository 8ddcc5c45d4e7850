"""The platform help fixtures (defined in tests/hbk_fixtures.py, shared by every folder with
platform help tests)."""

from hbk_fixtures import deadline, decorated, globals_result, sample_entries  # noqa: F401 - fixtures
