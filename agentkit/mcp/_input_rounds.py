"""Input-required rounds (protocol 2026-07-28) for served tools that ask the client.

The 2026-07-28 revision has no mid-call server-to-client requests. A tool that needs the
user's answer ends its ``tools/call`` with an ``InputRequiredResult`` carrying the question;
the client answers and sends the same call again with ``inputResponses`` and the echoed
``requestState``. The tool body runs again from the start and, this time, the question it
asks is answered from the round's answers instead of going to the client.

``requestState`` carries the answers of earlier rounds (the client sends back only the last
round's responses). The SDK's ``RequestStateBoundary`` middleware seals it (AES-GCM, bound
to the tool name, its arguments and the server), so what arrives here is what we minted.
An answer counts only for the exact question it answered (a digest of the rendered
request), so a tool that asks something else on a later round asks again.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING, Any

from agentkit.exceptions import MCPError

if TYPE_CHECKING:
    from mcp import types

__all__ = ["InputRequired", "InputRounds"]

_STATE_VERSION = 1


class InputRequired(MCPError):
    """Raised inside a served tool when the client must answer first (2026-07-28).

    The server ends the call with an ``InputRequiredResult``; the client retries it with
    the answer. A tool should let it propagate (catching it does not stop the round).
    """


def _digest(request: types.ElicitRequest) -> str:
    """Pin an answer to the exact question shown to the user."""
    params = request.params.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).digest()[:16]
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class InputRounds:
    """The answers one served ``tools/call`` round has, and the question it still needs.

    Attributes:
        answers: ``key -> {"q": question digest, "r": ElicitResult as JSON}`` so far.
        pending: The questions to send back in this round's ``InputRequiredResult``.
    """

    def __init__(self, answers: dict[str, dict[str, Any]] | None = None) -> None:
        self.answers: dict[str, dict[str, Any]] = dict(answers or {})
        self.pending: dict[str, types.ElicitRequest] = {}
        self._asked = 0

    @classmethod
    def from_params(cls, params: types.CallToolRequestParams) -> InputRounds:
        """The rounds so far, from a call's (unsealed) ``requestState`` and ``inputResponses``."""
        from mcp_types import ElicitResult

        answers: dict[str, dict[str, Any]] = {}
        asked: dict[str, str] = {}
        if params.request_state:
            try:
                state = json.loads(params.request_state)
            except ValueError:
                state = None
            if isinstance(state, dict) and state.get("v") == _STATE_VERSION:
                answers = dict(state.get("answers") or {})
                asked = {str(k): str(v) for k, v in dict(state.get("asked") or {}).items()}
        for key, response in (params.input_responses or {}).items():
            if key in asked and isinstance(response, ElicitResult):
                answers[key] = {"q": asked[key], "r": response.model_dump(mode="json")}
        return cls(answers)

    def elicit(self, request: types.ElicitRequest) -> types.ElicitResult:
        """The client's answer to ``request`` (the n-th question of the call).

        Raises:
            InputRequired: Not answered yet; the round ends and the client is asked.
        """
        from mcp_types import ElicitResult

        key = f"elicit-{self._asked}"
        self._asked += 1
        known = self.answers.get(key)
        if known is not None and known.get("q") == _digest(request):
            return ElicitResult.model_validate(known["r"])
        self.pending[key] = request
        raise InputRequired(
            "the client's answer is needed first: this call ends with an input-required "
            "result and is retried with the answer"
        )

    def result(self) -> types.InputRequiredResult:
        """The ``InputRequiredResult`` asking the pending questions."""
        from mcp_types import InputRequiredResult

        asked = {key: _digest(request) for key, request in self.pending.items()}
        state = {"v": _STATE_VERSION, "answers": self.answers, "asked": asked}
        return InputRequiredResult(
            input_requests=dict(self.pending),
            request_state=json.dumps(state, separators=(",", ":")),
        )
