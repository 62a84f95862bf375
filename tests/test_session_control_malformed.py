"""A malformed control message (not JSON, not an object, nested 5000 deep) is logged and
ignored: the held run goes on, and the next valid command still reaches it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentkit.session import JSONSession, hold_session
from agentkit.session import _file_control as fc
from agentkit.session._control import MAILBOX_NAME, channel_name


class Holder:
    def __init__(self) -> None:
        self.interrupted = anyio.Event()
        self.messages: list[Any] = []

    async def interrupt(self, msg: Any = None) -> bool:
        self.messages.append(msg)
        self.interrupted.set()
        return True


async def test_malformed_control_messages_are_ignored_and_the_hold_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = JSONSession(tmp_path / "sessions")
    holder = Holder()
    mailbox = tmp_path / "sessions" / MAILBOX_NAME
    channel = channel_name(store, "chat-1")
    bad = [b"[" * 5000 + b"]" * 5000, b"not json", b"[1, 2]", b"{" * 3000]
    with caplog.at_level(logging.WARNING, logger="agentkit.session"):
        async with hold_session(store, "chat-1", holder):
            (folder,) = mailbox.glob(f"{channel}@*")  # the holder's folder
            for i, data in enumerate(bad):  # written as another process would
                (folder / f"{i:020d}-bad.json").write_bytes(data)
            good = b'{"command": "interrupt", "message": "stop now"}'
            (folder / f"{len(bad):020d}-good.json").write_bytes(good)
            bell = "-".join(folder.name.rpartition("@")[2].split("-", 2)[:2])
            fc._ring(mailbox / ".bells" / bell, "test")  # then rung, as a publisher does
            with anyio.fail_after(10):
                await holder.interrupted.wait()
    assert holder.messages == ["stop now"]
    ignored = [r for r in caplog.records if "malformed control message" in r.getMessage()]
    assert len(ignored) == 4
    assert all(len(r.getMessage()) < 400 for r in ignored)  # the log shows a short excerpt
