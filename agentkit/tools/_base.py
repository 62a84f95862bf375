"""The one internal tool interface: a local function and an MCP tool both implement ``Tool``.

The Toolkit owns everything that must be the same for every tool: lookup, group activation,
argument validation (jsonschema), timeouts, error conversion, output limits, cancellation.
A ``Tool`` only has to describe itself and run with already-validated arguments.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agentkit.tools._quickcheck import QuickCheck, compile_check, well_formed
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

    from agentkit.models._base import ToolDefinition
    from agentkit.tools._annotations import ToolAnnotations
    from agentkit.tools._context import ToolContext

__all__ = ["CLOSE_TIMEOUT", "ArgumentChecks", "Tool"]


# Compiled checks by schema text. Checking a schema against the meta-schema costs milliseconds;
# tools rebuilt per conversation (MCP tools of a new connection, a closure per request)
# present the same schema again and again. Validators keep no state between calls.
_COMPILED: dict[str, tuple[Validator, QuickCheck | None]] = {}
_COMPILED_LIMIT = 512


# Bound on a tool's cleanup (an async generator's ``aclose``, a sync generator's
# ``finally``) when its call is cut short: it must finish, but never hang an interrupt.
CLOSE_TIMEOUT = 5.0


def _compiled(parameters: dict[str, object]) -> tuple[Validator, QuickCheck | None]:
    """The validator and fast path of ``parameters``, shared by equal schemas."""
    try:
        key: str | None = json.dumps(parameters, sort_keys=True)
    except (TypeError, ValueError):  # not JSON (a schema with Python objects): uncached
        key = None
    found = _COMPILED.get(key) if key is not None else None
    if found is None:
        # Imported here: jsonschema costs ~35 ms and ``import agentkit`` must stay cheap.
        from agentkit.tools._patterns import linear_validator

        # A private copy: a tool that later edits its ``parameters`` dict must not change
        # the checks shared with other tools.
        schema = parameters if key is None else json.loads(key)
        # Draft 2020-12 with ``pattern`` on RE2: a schema from outside cannot freeze us.
        # The fast path of argument checking (see ``_quickcheck``), built alongside.
        found = (linear_validator(schema), compile_check(schema))
        if key is not None:
            if len(_COMPILED) >= _COMPILED_LIMIT:
                _COMPILED.clear()
            _COMPILED[key] = found
    return found


class ArgumentChecks:
    """The compiled argument checks of one ``parameters`` schema, built on first use.

    Shared by every tool built from the same function spec, so a Toolkit created per
    conversation does not compile its validators again.

    The fast path is compiled on its own, without jsonschema, for a schema it can prove
    well-formed: a call it proves valid needs no validator, so the first tool call of a
    process does not stall the event loop importing jsonschema and checking the schema
    against the meta-schema (hundreds of milliseconds on a busy machine).
    """

    __slots__ = ("_quick_compiled", "parameters", "quick", "validator")

    def __init__(self, parameters: dict[str, object]) -> None:
        self.parameters = parameters
        self.validator: Validator | None = None
        self.quick: QuickCheck | None = None
        self._quick_compiled = False

    def get_validator(self) -> Validator:
        """The Draft 2020-12 validator (with the fast path compiled alongside).

        Raises:
            jsonschema.exceptions.SchemaError: ``parameters`` is not a valid JSON schema.
        """
        validator = self.validator
        if validator is None:
            validator, self.quick = _compiled(self.parameters)
            self.validator = validator
            self._quick_compiled = True
        return validator

    def certainly_valid(self, arguments: object) -> bool:
        """True when the fast path proves ``arguments`` valid (False: ask the validator).

        True only for a schema the meta-schema accepts too (``well_formed``): a broken
        schema is still reported by ``get_validator``, whatever the arguments.
        """
        if not self._quick_compiled:
            quick = compile_check(self.parameters)
            self.quick = quick if quick is not None and well_formed(self.parameters) else None
            self._quick_compiled = True
        quick = self.quick
        return quick is not None and quick(arguments)


class Tool(ABC):
    """A callable tool with a JSON schema.

    Attributes:
        name: Unique name in its Toolkit (what the model calls).
        description: What the tool does, for the model.
        parameters: JSON schema (an ``object`` schema) of the arguments.
        group: Tool group name.
        requires_approval: A human must approve each call before it runs.
        sequential: Acts as a barrier when several calls run in one turn.
        timeout: Seconds before the call is cancelled and answered with an error.
        annotations: Its MCP annotations (title, read-only/destructive... hints), set with
            :func:`agentkit.tools.annotate`; None: none stated.
        reports_progress: The tool reports progress out of band while it runs
            (``ToolContext.report_progress``, MCP progress notifications): the Toolkit then
            runs it in a task of its own so that the progress streams live.
    """

    reports_progress: bool = False

    def __init__(
        self,
        name: str,
        description: str,
        parameters: dict[str, object],
        *,
        group: str = "basic",
        requires_approval: bool = False,
        sequential: bool = False,
        timeout: float | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters
        self.group = group
        self.requires_approval = requires_approval
        self.sequential = sequential
        self.timeout = timeout
        self.annotations: ToolAnnotations | None = None
        self._checks: ArgumentChecks | None = None
        self._definition: ToolDefinition | None = None

    @property
    def tool_definition(self) -> ToolDefinition:
        """The provider-neutral definition offered to models.

        The same (frozen) object from request to request while the name, description and
        offered schema are the same objects: every request of every run asks for it, and a
        new one each time would be one more object per tool a waiting request holds.
        """
        parameters = self._offered_parameters()
        made = self._definition
        if (
            made is not None
            and made.parameters is parameters
            and made.name is self.name
            and made.description is self.description
        ):
            return made
        from agentkit.models._base import ToolDefinition

        made = self._definition = ToolDefinition(self.name, self.description, parameters)
        return made

    def _offered_parameters(self) -> dict[str, object]:
        """The schema offered to models and validated against (``parameters``).

        A subclass that holds a schema shared with other tools returns it here without
        copying, and gives callers of ``parameters`` a copy of their own.
        """
        return self.parameters

    def invalidate_schema(self) -> None:
        """Drop the compiled argument checks after ``parameters`` changed."""
        self._checks = None

    @property
    def checks(self) -> ArgumentChecks:
        """The compiled argument checks of ``parameters`` (built on first call, cached)."""
        checks, parameters = self._checks, self._offered_parameters()
        if checks is None or checks.parameters is not parameters:
            checks = self._checks = ArgumentChecks(parameters)
        return checks

    def requires_approval_in(self, toolkit: object) -> bool:
        """Whether a call run by ``toolkit`` needs approval (the agent asks this).

        A tool shared by toolkits (``Toolkit.copy()``) may judge each on its own state (an
        MCP tool: the open-world input that entered that conversation); by default, the
        ``requires_approval`` attribute.
        """
        return self.requires_approval

    def get_validator(self) -> Validator:
        """The Draft 2020-12 validator of ``parameters``, built on first use and cached.

        Raises:
            jsonschema.exceptions.SchemaError: ``parameters`` is not a valid JSON schema.
        """
        return self.checks.get_validator()

    @abstractmethod
    def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        """Run the tool with validated arguments.

        Implementations are async generators: yield progress chunks (``is_last=False``)
        and end with one final chunk. They may raise; the Toolkit converts exceptions into
        error responses. They must let cancellation propagate.
        """

    def invoke_with_context(
        self, arguments: dict[str, object], context: ToolContext
    ) -> AsyncIterator[ToolResponse]:
        """Run the tool with validated arguments and the call's context.

        The Toolkit always calls this method. The default ignores ``context`` and calls
        :meth:`invoke`; a tool that wants the call id or to report progress overrides it.
        """
        return self.invoke(arguments)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, group={self.group!r})"
