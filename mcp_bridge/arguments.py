"""The MCP tools' argument types: every string argument bounded and checked the same way (its
errors never repeat the value), booleans strict, the enumerations as ``Literal`` types the
published input schemas list. :mod:`mcp_bridge.tools` declares its tools' parameters with them."""

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from daemon.contract import MAX_NAME_CHARS, MAX_PATH_CHARS, MAX_QUERY_CHARS, MODULE_KINDS, SCOPES, SEARCH_MODES

#: ``wait_fresh`` of search and find_symbol, seconds: bounded so that a call stays well inside the
#: bridge's request timeout (``mcp_bridge.links.REQUEST_TIMEOUT``).
MAX_WAIT_FRESH_S = 10.0
#: Entry kinds ``platform_help`` may be narrowed to (``daemon.service.platform.ENTRY_KIND_NAMES``).
PLATFORM_ENTRY_KINDS = (
    "function",
    "global_property",
    "type",
    "constructor",
    "method",
    "property",
    "enum",
    "enum_value",
    "event",
    "keyword",
)


def _text(limit: int, *, required: bool) -> BeforeValidator:
    """The check of a string argument, before pydantic's (so that its errors read the same for
    every tool and never repeat the value): at most ``limit`` characters, no NUL character and,
    when ``required``, not empty or only spaces (one error for both)."""

    def check(value: object) -> object:
        if isinstance(value, str):
            if len(value) > limit:
                raise ValueError(f"{len(value)} characters long; at most {limit}")
            if "\x00" in value:
                raise ValueError("contains a NUL character")
            if required and not value.strip():
                raise ValueError("empty or only spaces")
        return value

    return BeforeValidator(check)


def _flag(value: object) -> object:
    """A boolean argument: ``true``/``false``, or those words as a string (a client that sends every
    value as text); anything else (``"yes"``, ``1``) is an error rather than a guess."""
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ValueError("must be true or false")


#: String arguments, bounded (:data:`daemon.contract.MAX_QUERY_CHARS` and the name and path bounds);
#: integers given as text ("5") are still accepted: pydantic's lax mode, the SDK's for every tool, and
#: not ambiguous.
Query = Annotated[str, Field(max_length=MAX_QUERY_CHARS), _text(MAX_QUERY_CHARS, required=True)]
Name = Annotated[str, Field(max_length=MAX_NAME_CHARS), _text(MAX_NAME_CHARS, required=True)]
RelPath = Annotated[str, Field(max_length=MAX_PATH_CHARS), _text(MAX_PATH_CHARS, required=True)]
OptName = Annotated[str | None, Field(max_length=MAX_NAME_CHARS), _text(MAX_NAME_CHARS, required=False)]
OptPath = Annotated[str | None, Field(max_length=MAX_PATH_CHARS), _text(MAX_PATH_CHARS, required=False)]
Flag = Annotated[bool, BeforeValidator(_flag)]
SearchMode = Literal[SEARCH_MODES]  # type: ignore[valid-type]
Scope = Literal[SCOPES]  # type: ignore[valid-type]
#: find_symbol looks up definitions in the export: platform help has its own tool
SymbolScope = Literal[tuple(s for s in SCOPES if s not in ("platform", "all"))]  # type: ignore[valid-type]
PlatformKind = Literal[PLATFORM_ENTRY_KINDS]  # type: ignore[valid-type]
ModuleKind = Literal[MODULE_KINDS]  # type: ignore[valid-type]
Root = Annotated[OptPath, Field(description="Export root (its name or path)")]
WaitFresh = Annotated[
    float,
    Field(
        ge=0,
        le=MAX_WAIT_FRESH_S,
        description="Seconds to wait for changed files to be indexed first (1 after an edit)",
    ),
]
Detail = Annotated[Flag, Field(description="true: every field")]
