"""The help-book builder of the platform help tests: :mod:`daemon.dev.hbk_build` (``bsl-lens bench
--platform`` builds its big book with it too), under the name the tests import."""

from daemon.dev.hbk_build import *  # noqa: F403
