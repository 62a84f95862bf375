"""Provider-neutral messages and content blocks.

Blocks are ``TypedDict``s keyed by ``type``: a plain ``dict`` is a valid block and JSON is
their native form, so messages serialize without any custom encoder. ``Msg`` is a small
slotted class (cheap to build, cheap to keep thousands of) with exact JSON round-tripping
through :meth:`Msg.to_dict` / :meth:`Msg.from_dict`.

Blocks may carry extra keys (a provider's signature, a cache hint): they are kept verbatim
through serialization, so a conversation can be continued with the provider that made it.
"""

from __future__ import annotations

import base64
import enum
import functools
import mimetypes
import os
import pathlib
import time
from collections.abc import Hashable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, cast, overload

from agentkit._ids import new_id_bytes
from agentkit._text import clean_json, clean_text, copy_json, is_clean
from agentkit.exceptions import MessageValidationError

__all__ = [
    "AudioBlock",
    "Base64Source",
    "ContentBlock",
    "DocumentBlock",
    "ImageBlock",
    "Msg",
    "MsgInput",
    "ProviderItemBlock",
    "Role",
    "TextBlock",
    "TextSource",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "URLSource",
    "audio_block",
    "document_block",
    "file_block",
    "image_block",
    "text_of",
    "validate_block",
]

Role: TypeAlias = Literal["user", "assistant", "system"]
_ROLES: frozenset[str] = frozenset(("user", "assistant", "system"))


class Base64Source(TypedDict):
    """Inline binary data."""

    type: Literal["base64"]
    media_type: str
    data: str


class URLSource(TypedDict):
    """Data referenced by URL."""

    type: Literal["url"]
    url: str


class TextSource(TypedDict):
    """A document's plain text, inline (documents only; Anthropic's ``text`` source)."""

    type: Literal["text"]
    media_type: str
    """``"text/plain"``."""
    data: str


class TextBlock(TypedDict):
    """Plain text."""

    type: Literal["text"]
    text: str


class ThinkingBlock(TypedDict):
    """Model reasoning; ``signature`` (Anthropic) must be kept to continue a conversation."""

    type: Literal["thinking"]
    thinking: str
    signature: NotRequired[str]


class ToolUseBlock(TypedDict):
    """A tool call requested by the model.

    ``raw_input`` is present only when the arguments are not a valid JSON object: while they
    are still streaming in a partial chunk, or, in a final response, when the model produced
    malformed JSON (the agent then answers the call with an error result). A block with
    ``raw_input`` is never executed.
    """

    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]
    raw_input: NotRequired[str]


class ImageBlock(TypedDict):
    """An image, inline (base64) or by URL."""

    type: Literal["image"]
    source: Base64Source | URLSource


class AudioBlock(TypedDict):
    """An audio clip, inline (base64) or by URL.

    Audio a model spoke (OpenAI audio output) also carries its ``transcript`` and, while
    the provider keeps the clip, the ``id`` and ``expires_at`` (Unix seconds) that let a
    later request refer to it instead of resending it.
    """

    type: Literal["audio"]
    source: Base64Source | URLSource
    transcript: NotRequired[str]
    id: NotRequired[str]
    expires_at: NotRequired[int]


class DocumentBlock(TypedDict):
    """A document (a PDF...), inline (base64), by URL, or plain text (``TextSource``).

    ``title`` and ``filename`` are optional hints some providers show the model (Anthropic
    document titles, OpenAI file names).
    """

    type: Literal["document"]
    source: Base64Source | URLSource | TextSource
    title: NotRequired[str]
    filename: NotRequired[str]


class ProviderItemBlock(TypedDict):
    """A provider's own output item, kept verbatim so it can be sent back to that provider.

    Server-side tool calls and their results (Anthropic ``server_tool_use`` /
    ``web_search_tool_result``, OpenAI Responses ``web_search_call``...) have no
    provider-neutral form: they are replayed as they came to the provider named here and
    left out of requests to any other.
    """

    type: Literal["provider_item"]
    provider: str
    item: dict[str, object]


class ToolResultBlock(TypedDict):
    """The result of one tool call, paired with its ``tool_use`` by ``id``."""

    type: Literal["tool_result"]
    id: str
    name: str
    output: str | list[TextBlock | ImageBlock | AudioBlock | DocumentBlock]
    is_error: NotRequired[bool]


ContentBlock: TypeAlias = (
    TextBlock
    | ThinkingBlock
    | ToolUseBlock
    | ToolResultBlock
    | ImageBlock
    | AudioBlock
    | DocumentBlock
    | ProviderItemBlock
)

# Required keys and their types per block type; extra keys are allowed and kept.
_REQUIRED: dict[str, tuple[tuple[str, type | tuple[type, ...]], ...]] = {
    "text": (("text", str),),
    "thinking": (("thinking", str),),
    "tool_use": (("id", str), ("name", str), ("input", dict)),
    "tool_result": (("id", str), ("name", str), ("output", (str, list))),
    "image": (("source", dict),),
    "audio": (("source", dict),),
    "document": (("source", dict),),
    "provider_item": (("provider", str), ("item", dict)),
}
_MEDIA = frozenset(("image", "audio", "document"))
_SOURCE_KEYS: dict[str, tuple[str, ...]] = {
    "base64": ("media_type", "data"),
    "url": ("url",),
    "text": ("media_type", "data"),  # documents only (see ``_check_source``)
}
# String fields checked for valid Unicode per block type.
_TEXT_KEYS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "thinking": ("thinking",),
    "tool_use": ("id", "name", "raw_input"),
    "tool_result": ("id", "name", "output"),
    "audio": ("transcript",),
}


def _check_source(source: dict[str, object], path: str, kind: str) -> None:
    """Check a media block's ``source``; a plain-text source is for documents only."""
    source_type = source.get("type")
    keys = _SOURCE_KEYS.get(source_type) if isinstance(source_type, str) else None
    if keys is None or (source_type == "text" and kind != "document"):
        allowed = "'base64', 'url' or 'text'" if kind == "document" else "'base64' or 'url'"
        raise MessageValidationError(f"{path}.type", f"must be {allowed}")
    for key in keys:
        if not isinstance(source.get(key), str):
            raise MessageValidationError(f"{path}.{key}", "required string is missing")


def validate_block(block: object, path: str = "block") -> ContentBlock:
    """Check that ``block`` is a well-formed content block and return it.

    Args:
        block: The candidate block (usually a dict from JSON or user code).
        path: Where the block sits, used in the error message (``content[2]``).

    Returns:
        The same object, typed as a content block.

    Raises:
        MessageValidationError: naming the offending field.
    """
    if not isinstance(block, dict):
        raise MessageValidationError(path, f"a block must be a dict, got {type(block).__name__}")
    kind = block.get("type")
    if kind is None:
        raise MessageValidationError(f"{path}.type", "every block needs a 'type' key")
    required = _REQUIRED.get(kind) if isinstance(kind, str) else None
    if required is None:
        raise MessageValidationError(
            f"{path}.type", f"unknown block type {kind!r}; expected one of {sorted(_REQUIRED)}"
        )
    for key, expected in required:
        value = block.get(key)
        if not isinstance(value, expected) or (key == "id" and not value):
            raise MessageValidationError(f"{path}.{key}", f"a {kind} block needs {key!r}")
    # Text reaches blocks from outside (tools, models, files, users); one lone surrogate
    # would make every later request and session save fail, so it is fixed here, visibly
    # (see ``agentkit._text``), in place. Inline: this runs for every block of every message.
    for key in _TEXT_KEYS.get(kind, ()):
        value = block.get(key)
        if isinstance(value, str) and not (value.isascii() or is_clean(value)):
            block[key] = clean_text(value)
    if kind == "tool_use":
        try:
            block["input"] = clean_json(block["input"])  # the same object when already clean
        except ValueError as exc:  # nested too deeply to ever be encoded or saved
            raise MessageValidationError(f"{path}.input", str(exc)) from None
    if kind in _MEDIA:
        _check_source(block["source"], f"{path}.source", kind)
    elif kind == "tool_result" and isinstance(block["output"], list):
        for i, inner in enumerate(block["output"]):
            validate_block(inner, f"{path}.output[{i}]")
    # Not ``cast``: that is a Python call, and this runs for every block of every message.
    return block  # type: ignore[return-value]


# Compact storage of ids and timestamps. A conversation keeps every message for its whole life,
# and a 32-character hex id or ISO timestamp string costs 96 bytes of heap each: a message
# keeps its generated id as its 16 bytes (64) and its timestamp as integer microseconds since
# the epoch (32), and turns them into the same text on access. Only text that converts back
# exactly is packed (32 lowercase hex digits; the UTC form ``_timestamp_text`` writes), so any
# other id or timestamp a user or an old saved state supplies is kept as the string it was.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)


@functools.lru_cache(maxsize=512)
def _second_text(seconds: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of a Unix second (cached: a conversation spans few seconds)."""
    return (_EPOCH + timedelta(seconds=seconds)).isoformat()[:19]


def _timestamp_text(micros_since_epoch: int) -> str:
    """The UTC time as ``datetime.isoformat()`` writes it (no fraction when it is zero)."""
    seconds, micros = divmod(micros_since_epoch, 1_000_000)
    if not micros:
        return _second_text(seconds) + "+00:00"
    # str(1_000_000 + micros)[1:] is micros in six digits, 4x faster than format(micros, "06d").
    return f"{_second_text(seconds)}.{str(1_000_000 + micros)[1:]}+00:00"


def _second_of(prefix: str) -> int | None:
    """The Unix second that ``_second_text`` writes as ``prefix``, or None."""
    try:
        seconds = (datetime.fromisoformat(prefix).replace(tzinfo=UTC) - _EPOCH) // _SECOND
    except (ValueError, OverflowError):
        return None
    return seconds if _second_text(seconds) == prefix else None


# ``_second_of`` per ``YYYY-MM-DDTHH:MM:SS`` prefix: a loaded conversation's timestamps share
# few seconds. A plain dict read inline costs a third of an ``lru_cache`` call, and loading a
# saved conversation packs one timestamp per message; emptied when full (bounded memory).
_SECONDS_OF: dict[str, int | None] = {}
_SECONDS_OF_SIZE = 512


def _pack_timestamp(text: str) -> int | str:
    """Integer microseconds when they give back exactly ``text``, else ``text`` itself."""
    if len(text) == 32:  # YYYY-MM-DDTHH:MM:SS.ffffff+00:00 (never a zero fraction)
        fraction = text[20:26]
        # isdigit also takes non-ASCII digits, which int() would read: isascii rules them out.
        if (
            text[26:] != "+00:00"
            or text[19] != "."
            or not (fraction.isdigit() and fraction.isascii())
        ):
            return text
        micros = int(fraction)
        if not micros:  # written without a fraction by ``_timestamp_text``
            return text
    elif len(text) == 25 and text.endswith("+00:00"):  # YYYY-MM-DDTHH:MM:SS+00:00
        micros = 0
    else:
        return text
    prefix = text[:19]
    try:
        seconds = _SECONDS_OF[prefix]
    except KeyError:
        if len(_SECONDS_OF) >= _SECONDS_OF_SIZE:
            _SECONDS_OF.clear()
        seconds = _SECONDS_OF[prefix] = _second_of(prefix)
    if seconds is None:
        return text
    return seconds * 1_000_000 + micros


def _pack_id(text: str) -> bytes | str:
    """The 16 bytes of a 32-digit lowercase hex id, else ``text`` itself."""
    if len(text) == 32:
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            return text
        if raw.hex() == text:  # fromhex also accepts upper case and spaces
            return raw
    return text


class _Keep(enum.Enum):
    """``Msg.replace``'s "leave this field as it is" (None is a value metadata can take)."""

    KEEP = enum.auto()


def _role_error(role: object) -> MessageValidationError:
    return MessageValidationError("role", f"must be one of {sorted(_ROLES)}, got {role!r}")


def _checked_content(content: object) -> str | list[ContentBlock]:
    """``content`` checked: every block validated (and cleaned) in place, text cleaned."""
    if isinstance(content, list):
        for i, block in enumerate(content):
            validate_block(block, f"content[{i}]")
        return content
    if not isinstance(content, str):
        raise MessageValidationError("content", "must be a string or a list of blocks")
    return clean_text(content)


def _checked_metadata(metadata: object) -> dict[str, Any]:
    """Metadata other than None checked: a dict, its strings cleaned."""
    if not isinstance(metadata, dict):
        raise MessageValidationError("metadata", "must be a dict or None")
    try:
        return cast(dict[str, Any], clean_json(metadata)) if metadata else metadata
    except ValueError as exc:
        raise MessageValidationError("metadata", str(exc)) from None


class Msg:
    """One message of a conversation.

    Args:
        name: Who wrote it (an agent's or user's name).
        content: A string, or a list of content blocks.
        role: ``"user"``, ``"assistant"`` or ``"system"``.
        metadata: JSON-safe extra data (structured output, interruption marks, usage...).
        id: Stable identifier; generated when omitted.
        timestamp: ISO-8601 creation time (UTC); generated when omitted.

    Text holding lone surrogates (undecodable bytes escaped by the OS, half an emoji) is
    made valid Unicode on construction (see ``agentkit._text``: an escaped byte becomes
    visible hex, any other lone surrogate U+FFFD), so a message always serializes.

    Raises:
        MessageValidationError: on an unknown role or a malformed block.
    """

    __slots__ = ("_id", "_timestamp", "content", "metadata", "name", "role")

    def __init__(
        self,
        name: str,
        content: str | list[ContentBlock],
        role: Role,
        metadata: dict[str, Any] | None = None,
        *,
        id: str | None = None,
        timestamp: str | None = None,
    ) -> None:
        if role not in _ROLES:
            raise _role_error(role)
        if not isinstance(name, str):
            raise MessageValidationError("name", "must be a string")
        content = _checked_content(content)
        if metadata is not None:
            metadata = _checked_metadata(metadata)
        # 16 random bytes, shown as 32 hex digits like uuid4().hex.
        self._id: bytes | str = _pack_id(id) if id else new_id_bytes()
        self.name: str = clean_text(name)
        self.role: Role = role
        self.content: str | list[ContentBlock] = content
        self.metadata: dict[str, Any] | None = metadata
        self._timestamp: int | str = (
            _pack_timestamp(timestamp) if timestamp else time.time_ns() // 1000
        )

    def replace(
        self,
        *,
        name: str | None = None,
        content: str | list[ContentBlock] | None = None,
        role: Role | None = None,
        metadata: dict[str, Any] | _Keep | None = _Keep.KEEP,
    ) -> Msg:
        """Return a message with this one's id and timestamp and the given fields changed.

        What is given is checked (and cleaned) as the constructor checks it; what is not
        given is shared with this message, not copied (use :meth:`copy` for an independent
        message). Cheaper than ``Msg(..., id=msg.id, timestamp=msg.timestamp)``, which
        formats the id and timestamp as text, parses them back and checks every block again.

        Args:
            name: A new author (None: this message's).
            content: New content (None: this message's, shared).
            role: A new role (None: this message's).
            metadata: New metadata, None included (left out: this message's, shared).

        Raises:
            MessageValidationError: on an unknown role or a malformed block given here.
        """
        new = type(self).__new__(type(self))  # a subclass stays one
        new._id = self._id
        new._timestamp = self._timestamp
        if name is None:
            new.name = self.name
        elif isinstance(name, str):
            new.name = clean_text(name)
        else:
            raise MessageValidationError("name", "must be a string")
        if role is None:
            new.role = self.role
        elif role in _ROLES:
            new.role = role
        else:
            raise _role_error(role)
        new.content = self.content if content is None else _checked_content(content)
        if metadata is _Keep.KEEP:
            new.metadata = self.metadata
        else:
            new.metadata = None if metadata is None else _checked_metadata(metadata)
        return new

    @property
    def id(self) -> str:
        """Stable identifier (32 hex digits when generated)."""
        value = self._id
        return value.hex() if isinstance(value, bytes) else value

    @id.setter
    def id(self, value: str) -> None:
        self._id = _pack_id(value)

    @property
    def id_key(self) -> Hashable:
        """A key equal for two messages exactly when their ids are (no text is made).

        For comparing and indexing ids in bulk (memory's duplicate check): the id is held
        packed, and :attr:`id` makes its text on each access.
        """
        return self._id

    @property
    def timestamp(self) -> str:
        """ISO-8601 creation time, as ``datetime.now(UTC).isoformat()`` writes it."""
        value = self._timestamp
        return _timestamp_text(value) if isinstance(value, int) else value

    @timestamp.setter
    def timestamp(self, value: str) -> None:
        self._timestamp = _pack_timestamp(value)

    # -- accessors ---------------------------------------------------------------------
    def get_content_blocks(self) -> list[ContentBlock]:
        """Return the content as a list of blocks (a string becomes one text block)."""
        if isinstance(self.content, str):
            return [TextBlock(type="text", text=self.content)] if self.content else []
        return self.content

    @overload
    def get_blocks(self, block_type: Literal["text"]) -> list[TextBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["thinking"]) -> list[ThinkingBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["tool_use"]) -> list[ToolUseBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["tool_result"]) -> list[ToolResultBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["image"]) -> list[ImageBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["audio"]) -> list[AudioBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["document"]) -> list[DocumentBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["provider_item"]) -> list[ProviderItemBlock]: ...
    @overload
    def get_blocks(self, block_type: None = None) -> list[ContentBlock]: ...
    def get_blocks(self, block_type: str | None = None) -> list[Any]:
        """Return the blocks of one type (all blocks when ``block_type`` is None)."""
        blocks = self.get_content_blocks()
        if block_type is None:
            return list(blocks)
        return [b for b in blocks if b["type"] == block_type]

    def has_blocks(self, block_type: str) -> bool:
        """Whether the message holds at least one block of ``block_type``."""
        if isinstance(self.content, str):
            return block_type == "text" and bool(self.content)
        return any(b["type"] == block_type for b in self.content)

    def get_text(self, separator: str = "\n") -> str:
        """Join the text blocks (the string content itself for a string message)."""
        if isinstance(self.content, str):
            return self.content
        return text_of(self.content, separator)

    # -- serialization -----------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        """Return a JSON-safe dict that :meth:`from_dict` turns back into an equal Msg."""
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role,
            "content": copy_json(self.content),
            "metadata": copy_json(self.metadata),
            "timestamp": self.timestamp,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Msg:
        """Build a Msg from :meth:`to_dict` output, validating every field.

        Raises:
            MessageValidationError: naming the first missing or malformed field.
        """
        if not isinstance(data, dict):
            raise MessageValidationError("<root>", "a message must be a dict")
        fields: dict[str, Any] = data
        try:
            id, name, role = fields["id"], fields["name"], fields["role"]
            content, timestamp = fields["content"], fields["timestamp"]
        except KeyError as exc:  # the first missing one, in the order above
            raise MessageValidationError(exc.args[0], "required field is missing") from None
        if not isinstance(id, str) or not id:
            raise MessageValidationError("id", "must be a non-empty string")
        if not isinstance(timestamp, str) or not timestamp:
            raise MessageValidationError("timestamp", "must be a non-empty string")
        metadata = fields.get("metadata")
        try:
            if not isinstance(content, str):
                content = copy_json(content)
            if metadata is not None:
                metadata = copy_json(metadata)
        except RecursionError:
            raise MessageValidationError("content", "nested too deeply") from None
        # The constructor validates name and role; id and timestamp were checked above.
        return cls(name, content, role, metadata, id=id, timestamp=timestamp)

    def copy(self) -> Msg:
        """Return an independent copy with the same id and timestamp."""
        return Msg.from_dict(self.to_dict())

    # -- dunder ------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Msg):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable

    def __repr__(self) -> str:
        content = self.content if isinstance(self.content, str) else f"<{len(self.content)} blocks>"
        return f"Msg(name={self.name!r}, role={self.role!r}, content={content!r}, id={self.id!r})"


def _source(source: str | os.PathLike[str] | bytes, media_type: str | None, kind: str) -> Any:
    """A base64 source from a file path or bytes, or a URL source from an http(s) URL."""
    if isinstance(source, str) and source.startswith(("http://", "https://")):
        return {"type": "url", "url": source}
    if isinstance(source, bytes):
        data = source
        if media_type is None:
            raise MessageValidationError("media_type", f"needed for a {kind} given as bytes")
    else:
        path = pathlib.Path(source)
        data = path.read_bytes()
        media_type = media_type or mimetypes.guess_type(path.name)[0]
        if media_type is None:
            raise MessageValidationError("media_type", f"cannot guess the type of {path.name!r}")
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "base64", "media_type": media_type, "data": encoded}


def image_block(
    source: str | os.PathLike[str] | bytes, media_type: str | None = None
) -> ImageBlock:
    """An image block from a file path, raw bytes or an ``http(s)`` URL.

    Args:
        source: A path (read and base64-encoded now), bytes, or a URL (sent as a URL).
        media_type: The MIME type; guessed from a path's extension when None.

    Raises:
        MessageValidationError: when the type cannot be known.
        OSError: when the file cannot be read.
    """
    return ImageBlock(type="image", source=_source(source, media_type, "image"))


def audio_block(
    source: str | os.PathLike[str] | bytes, media_type: str | None = None
) -> AudioBlock:
    """An audio block from a file path, raw bytes or a URL (see ``image_block``)."""
    return AudioBlock(type="audio", source=_source(source, media_type, "audio"))


def document_block(
    source: str | os.PathLike[str] | bytes,
    media_type: str | None = None,
    *,
    title: str | None = None,
) -> DocumentBlock:
    """A document block (PDF...) from a file path, raw bytes or a URL.

    The file name of a path is kept as ``filename`` (OpenAI wants one for file inputs).
    """
    block = DocumentBlock(type="document", source=_source(source, media_type, "document"))
    if not isinstance(source, bytes) and not str(source).startswith(("http://", "https://")):
        block["filename"] = pathlib.Path(source).name
    if title is not None:
        block["title"] = title
    return block


def file_block(path: str | os.PathLike[str]) -> ImageBlock | AudioBlock | DocumentBlock:
    """An image, audio or document block from a file, chosen by its MIME type.

    Raises:
        MessageValidationError: when the type cannot be guessed from the extension.
    """
    media_type = mimetypes.guess_type(pathlib.Path(path).name)[0]
    if media_type is None:
        raise MessageValidationError("path", f"cannot guess the type of {os.fspath(path)!r}")
    if media_type.startswith("image/"):
        return image_block(path, media_type)
    if media_type.startswith("audio/"):
        return audio_block(path, media_type)
    return document_block(path, media_type)


MsgInput: TypeAlias = Msg | Sequence[Msg] | str | None
"""What an agent takes as input: a message, several, a user text, or None (go on)."""


def text_of(blocks: Iterable[Mapping[str, object]], separator: str = "") -> str:
    """Join the ``text`` of the text blocks among ``blocks`` (the one ``get_text``)."""
    return separator.join(str(b["text"]) for b in blocks if b["type"] == "text")
