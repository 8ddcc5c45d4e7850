"""User values in error messages: an error names what it rejects, but never echoes more than a
short prefix of it (a pasted file as a "name" must not come back as a 200 KB error).

:func:`shown` spells one value for a message; :func:`clip_echoes` is the net the daemon's server
and the MCP bridge put over every error they send, for the messages written with ``{value!r}``.
"""

from __future__ import annotations

#: Longest user value an error message repeats whole, in characters; a longer one is cut to
#: :data:`ECHO_PREFIX` characters and its length.
ECHO_CHARS = 80
ECHO_PREFIX = 40


def shown(value: str) -> str:
    """``value`` as an error message names it: its ``repr``, or for a value over
    :data:`ECHO_CHARS` the ``repr`` of its first :data:`ECHO_PREFIX` characters followed by
    ``… (N characters)``."""
    if len(value) <= ECHO_CHARS:
        return repr(value)
    return f"{value[:ECHO_PREFIX]!r}… ({len(value)} characters)"


def clip_echoes(message: str, values: list[object]) -> str:
    """``message`` with every whole echo of a long string among ``values`` (as written or as its
    ``repr``) replaced by :func:`shown`; other values and short strings are left alone. Cheap when
    nothing is long: the usual message comes back as it is."""
    for v in values:
        if isinstance(v, str) and len(v) > ECHO_CHARS:
            message = message.replace(repr(v), shown(v)).replace(v, shown(v))
    return message
