"""Audio output of OpenAI Chat Completions: parsing it into ``AudioBlock`` and replaying it.

A request with ``modalities=["text", "audio"]`` and ``audio={"voice": ..., "format": ...}``
gets its answer as ``message.audio`` (``id``, base64 ``data``, ``expires_at``,
``transcript``), or streamed as ``delta.audio`` pieces. The answer is kept as a text block
(the transcript, what the rest of the conversation reads) followed by an audio block that
carries the clip, its ``transcript``, and the ``id``/``expires_at`` OpenAI needs to replay
it. In later turns the assistant message is sent back as ``"audio": {"id": ...}`` while the
id is valid (the server still holds the clip), and as its transcript text afterwards.

Other providers have no audio output: a request for it raises ``UnsupportedContentError``
(:func:`reject_audio_output`), and an audio-output block in the history is left out of their
requests (its transcript is already a text block beside it).
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Iterable, Mapping

from agentkit._text import StreamText
from agentkit.exceptions import UnsupportedContentError
from agentkit.messages import AudioBlock, ContentBlock
from agentkit.models._json import JSONObject

__all__ = [
    "AudioStream",
    "audio_block_of",
    "audio_expiry",
    "is_audio_output",
    "reject_audio_output",
    "replay_audio",
    "sniff_audio_type",
]

# An id this close to its expiry is not replayed: the request may reach OpenAI after it.
EXPIRY_MARGIN = 30.0


def sniff_audio_type(data: bytes) -> str:
    """The media type of an audio clip from its first bytes.

    The answer does not name its format (the request did); the bytes do, except raw
    ``pcm16`` (16-bit little-endian mono at 24 kHz), which has no header.
    """
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    if data[:4] == b"fLaC":
        return "audio/flac"
    if data[:4] == b"OggS":
        return "audio/ogg"  # opus comes in an Ogg container
    if data[:3] == b"ID3":
        return "audio/mpeg"
    if len(data) >= 2 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0:
        # Frame sync: the layer bits are 00 for AAC (ADTS), non-zero for MP3.
        return "audio/aac" if data[1] & 0x06 == 0 else "audio/mpeg"
    return "audio/pcm"


def _decode(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return b""


def _block(data: bytes, ident: str | None, expires: int | None, transcript: str) -> AudioBlock:
    block: AudioBlock = {
        "type": "audio",
        "source": {
            "type": "base64",
            "media_type": sniff_audio_type(data),
            "data": base64.b64encode(data).decode("ascii"),
        },
        "transcript": transcript,
    }
    if ident:
        block["id"] = ident
    if expires is not None:
        block["expires_at"] = expires
    return block


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def audio_block_of(audio: JSONObject) -> AudioBlock | None:
    """The block of a non-streamed ``message.audio`` (None when it holds nothing)."""
    data = audio.get("data")
    raw = _decode(data) if isinstance(data, str) else b""
    ident = audio.get("id")
    transcript = audio.get("transcript")
    if not raw and not ident:
        return None
    return _block(
        raw,
        str(ident) if ident else None,
        _int_or_none(audio.get("expires_at")),
        transcript if isinstance(transcript, str) else "",
    )


class AudioStream:
    """Accumulates streamed ``delta.audio`` pieces.

    Each piece's ``data`` is decoded on arrival: the pieces are separately encoded base64,
    so their text cannot simply be joined.
    """

    __slots__ = ("data", "expires_at", "id", "transcript")

    def __init__(self) -> None:
        self.id: str | None = None
        self.data = bytearray()
        self.transcript = StreamText()
        self.expires_at: int | None = None

    def feed(self, piece: JSONObject) -> bool:
        """Apply one ``delta.audio``; return whether the transcript grew."""
        if piece.get("id") and self.id is None:
            self.id = str(piece["id"])
        data = piece.get("data")
        if isinstance(data, str) and data:
            self.data += _decode(data)
        expires = _int_or_none(piece.get("expires_at"))
        if expires is not None:
            self.expires_at = expires
        text = piece.get("transcript")
        if isinstance(text, str) and text:
            self.transcript.add(text)
            return True
        return False

    def text(self, *, final: bool) -> str:
        """The transcript so far."""
        return self.transcript.value(final=final)

    def block(self) -> AudioBlock | None:
        """The whole clip (made once, at the end: re-encoding it per chunk is quadratic)."""
        if not self.data and self.id is None:
            return None
        return _block(bytes(self.data), self.id, self.expires_at, self.text(final=True))

    def blocks(self, text: str, *, final: bool) -> list[ContentBlock]:
        """The transcript so far as text (unless ``text`` holds it); the clip when ``final``."""
        transcript = self.text(final=final)
        out: list[ContentBlock] = []
        if transcript and transcript != text:
            out.append({"type": "text", "text": transcript})
        block = self.block() if final else None
        return out + ([block] if block is not None else [])


def is_audio_output(block: ContentBlock) -> bool:
    """Whether ``block`` is audio a model produced (it has a transcript or a replay id)."""
    return block["type"] == "audio" and ("transcript" in block or "id" in block)


def _replayable(block: AudioBlock, now: float) -> bool:
    expires = block.get("expires_at")
    return bool(block.get("id")) and (expires is None or expires - EXPIRY_MARGIN > now)


def replay_audio(
    blocks: Iterable[AudioBlock], texts: list[str], now: float | None = None
) -> tuple[str | None, list[str]]:
    """How an assistant message's audio output goes back: ``(audio id, its text parts)``.

    The first clip whose id is still valid is replayed by id, and its transcript is left
    out of the text (the server has it); any other clip is replayed as its transcript
    (added to the text unless a text part already holds it).
    """
    now = time.time() if now is None else now
    replayed: str | None = None
    out = list(texts)
    for block in blocks:
        transcript = block.get("transcript", "")
        if replayed is None and _replayable(block, now):
            replayed = block.get("id")
            if transcript in out:
                out.remove(transcript)
        elif transcript and transcript not in out:
            out.append(transcript)
    return replayed, out


def audio_expiry(content: str | list[ContentBlock]) -> float | None:
    """When the wire form of a message holding audio ids changes (None: never)."""
    if isinstance(content, str):
        return None
    times = [
        float(b["expires_at"]) - EXPIRY_MARGIN
        for b in content
        if b["type"] == "audio" and b.get("id") and "expires_at" in b
    ]
    return min(times) if times else None


def reject_audio_output(body: Mapping[str, object], provider: str, api: str) -> None:
    """Raise ``UnsupportedContentError`` when ``body`` asks for audio output.

    For the APIs without audio output: a request for it fails before anything is sent,
    rather than being answered with text only.
    """
    modalities = body.get("modalities")
    wants = isinstance(modalities, list | tuple) and "audio" in modalities
    if wants or "audio" in body:
        raise UnsupportedContentError(
            f"{api} has no audio output (modalities/audio); use OpenAIChatModel with an "
            "audio model (gpt-4o-audio-preview...) for spoken answers",
            provider=provider,
        )
