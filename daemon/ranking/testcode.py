"""Which indexed files are test code: the ``test`` mark of a hit, and the demotion that ranks
production code above test code that matches a question equally.

A file is test code when a folder of its path is a test or fixtures folder
(:func:`daemon.sources.scan.in_test_folder`), when it lies in a project whose name says tests
(:func:`daemon.sources.scan.projects_of_test_code`), or when its module declares a test framework's
registration method (:data:`daemon.sources.scan.TEST_REGISTRATION_METHODS`, found through the
names channel's exact lookup). Nothing is built per store version: the folder rule is memoised
per path, the declaring modules are three binary searches of the names channel per content key.
"""

from __future__ import annotations

from ..contract import CODE_KINDS
from ..sources.scan import TEST_REGISTRATION_METHODS, in_test_folder, projects_of_test_code

#: The folder rule's memo is dropped past this many paths.
MEMO_MAX = 200_000


class TestCode:
    """``is_test(path)`` over one index state (read anew on every :meth:`refresh`)."""

    __test__ = False  # not a pytest class

    def __init__(self) -> None:
        self._key: object = None
        self._declared: frozenset[str] = frozenset()
        self._projects: tuple[str, ...] = ()
        self._memo: dict[str, bool] = {}

    def refresh(self, state) -> TestCode:
        """Bring the modules that declare a registration method and the test projects up to date
        with ``state`` (cheap when nothing changed); returns self."""
        key = (state.content_key(), id(state.info))
        if key != self._key:
            store, names = state.store, state.names
            declared = set()
            for name in TEST_REGISTRATION_METHODS:
                for slot in names.exact_slots(name).tolist():
                    if store.kind_of(slot) in CODE_KINDS:
                        declared.add(store.path_of(slot))
            self._declared = frozenset(declared)
            self._projects = projects_of_test_code(state.info)
            self._key = key
        return self

    def is_test(self, path: str) -> bool:
        """True for a file of test code (see the module docstring)."""
        folder = self._memo.get(path)
        if folder is None:
            if len(self._memo) >= MEMO_MAX:
                self._memo.clear()
            folder = self._memo[path] = in_test_folder(path)
        return folder or path in self._declared or (bool(self._projects) and path.startswith(self._projects))
