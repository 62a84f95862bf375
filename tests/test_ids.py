"""The one id generator (``agentkit._ids``): formats, uniqueness, forks, and no second one."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest

import agentkit
from agentkit._ids import new_id, new_id_bytes, new_uuid
from agentkit.messages import Msg
from agentkit.models._common import tool_use_block
from agentkit.testing import tool_use

ROOT = Path(agentkit.__file__).parent


def test_ids_have_the_shapes_callers_rely_on() -> None:
    assert re.fullmatch(r"[0-9a-f]{32}", new_id())
    assert re.fullmatch(r"call_[0-9a-f]{24}", new_id("call_", 12))
    assert re.fullmatch(r"[0-9a-f]{6}", new_id(nbytes=3))
    assert uuid.UUID(new_uuid()).version == 4
    assert len(new_id_bytes()) == 16
    assert re.fullmatch(r"[0-9a-f]{32}", Msg("u", "hi", "user").id)
    assert re.fullmatch(r"call_[0-9a-f]{24}", tool_use_block("", "f", "{}", final=True)["id"])
    assert re.fullmatch(r"call_[0-9a-f]{12}", tool_use("f")["id"])


@pytest.mark.parametrize("nbytes", [0, 17])
def test_an_id_size_out_of_range_is_refused(nbytes: int) -> None:
    with pytest.raises(ValueError, match="nbytes"):
        new_id(nbytes=nbytes)


def test_ids_do_not_repeat_across_pool_refills() -> None:
    ids = {new_id() for _ in range(1000)}  # about 16 batches of 64
    assert len(ids) == 1000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_does_not_reuse_the_parents_pool() -> None:
    new_id()  # the parent holds a partly used batch
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next id and leave at once
        os.write(write, new_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert re.fullmatch(r"[0-9a-f]{32}", child)
    assert child != new_id()  # the parent's next id is not the one the child made


def test_the_library_makes_ids_only_through_the_generator() -> None:
    # secrets.token_* stays where the value is a secret (nonces, capabilities, claims).
    pattern = re.compile(r"uuid\.uuid4\(|os\.urandom\(|random\.getrandbits|getrandbits\(")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in ROOT.rglob("*.py")
        if path.name != "_ids.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == [], offenders
