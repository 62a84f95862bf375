"""Input-required rounds (protocol 2026-07-28) for served tools and prompts that ask the client.

The 2026-07-28 revision has no mid-call server-to-client requests. A tool (or prompt) that
needs the client's answer (a form elicitation, a sampling completion, the client's roots)
ends its request with an ``InputRequiredResult`` carrying the questions; the client answers
and sends the same request again with ``inputResponses`` and the echoed ``requestState``.
The body runs again from the start and, this time, each question it asks is answered from
the round's answers instead of going to the client.

``requestState`` carries the answers of earlier rounds (the client sends back only the last
round's responses). The SDK's ``RequestStateBoundary`` middleware seals it (AES-GCM, bound
to the request's name, its arguments and the server), so what arrives here is what we
minted. An answer counts only for the exact question it answered (a digest of the rendered
request) and only if it is the right kind of answer, so a body that asks something else on
a later round, or a client that answers with garbage, is asked again.

Questions are named by their key in ``inputRequests``: the one the body gives, else
``<kind>-<n>`` (the n-th question of its kind). ``MCPContext.gather`` sends several
questions in one round.
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

_STATE_VERSION = 2
_KINDS = {"elicitation/create": "elicit", "sampling/createMessage": "sample", "roots/list": "roots"}


class InputRequired(MCPError):
    """Raised inside a served tool when the client must answer first (2026-07-28).

    The server ends the call with an ``InputRequiredResult``; the client retries it with
    the answer. A tool should let it propagate (catching it does not stop the round).
    """


def _digest(request: types.InputRequest) -> str:
    """Pin an answer to the exact question shown to the client."""
    given = request.params  # None for roots/list
    params = given.model_dump(mode="json", by_alias=True, exclude_none=True) if given else {}
    raw = json.dumps({"m": request.method, "p": params}, sort_keys=True).encode()
    return base64.urlsafe_b64encode(hashlib.sha256(raw).digest()[:16]).decode().rstrip("=")


def _result_type(request: types.InputRequest) -> Any:
    from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult

    return {
        "elicitation/create": ElicitResult,
        "sampling/createMessage": CreateMessageResult,
        "roots/list": ListRootsResult,
    }[request.method]


class InputRounds:
    """The answers one served request's round has, and the questions it still needs.

    Attributes:
        answers: ``key -> {"q": question digest, "r": the answer as JSON}`` so far.
        pending: The questions to send back in this round's ``InputRequiredResult``.
        next_key: The key the next question takes (set by ``MCPContext.gather``).
    """

    def __init__(self, answers: dict[str, dict[str, Any]] | None = None) -> None:
        self.answers: dict[str, dict[str, Any]] = dict(answers or {})
        self.pending: dict[str, types.InputRequest] = {}
        self.next_key: str | None = None
        self._asked: dict[str, int] = {}

    @classmethod
    def from_params(cls, params: types.InputResponseRequestParams) -> InputRounds:
        """The rounds so far, from a request's (unsealed) ``requestState`` and responses."""
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
            if key in asked:  # an answer to something never asked is ignored
                answers[key] = {"q": asked[key], "r": response.model_dump(mode="json")}
        return cls(answers)

    def ask(self, request: types.InputRequest, key: str | None = None) -> Any:
        """The client's answer to ``request`` (an ``ElicitResult``, ``CreateMessageResult``...).

        Raises:
            InputRequired: Not answered yet; the round ends and the client is asked.
        """
        from pydantic import ValidationError

        if key is None:
            key, self.next_key = self.next_key, None
        if key is None:
            kind = _KINDS[request.method]
            n = self._asked.get(kind, 0)
            self._asked[kind] = n + 1
            key = f"{kind}-{n}"
        known = self.answers.get(key)
        if known is not None and known.get("q") == _digest(request):
            try:
                return _result_type(request).model_validate(known["r"])
            except ValidationError:  # the wrong kind of answer: ask again
                pass
        self.pending[key] = request
        raise InputRequired(
            "the client's answer is needed first: this request ends with an input-required "
            "result and is retried with the answer"
        )

    def result(self) -> types.InputRequiredResult:
        """The ``InputRequiredResult`` asking the pending questions."""
        from mcp_types import InputRequiredResult

        asked = {key: _digest(request) for key, request in self.pending.items()}
        answers = {k: v for k, v in self.answers.items() if k not in self.pending}
        state = {"v": _STATE_VERSION, "answers": answers, "asked": asked}
        return InputRequiredResult(
            input_requests=dict(self.pending),
            request_state=json.dumps(state, separators=(",", ":")),
        )
