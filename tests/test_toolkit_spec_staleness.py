"""Shared function-tool specs never hand out a stale or another tool's schema.

Specs are shared by equal functions, closures of one ``def`` included, keyed by what they
are built from (see ``agentkit.tools._schema``); these tests change what a spec is built from after it was
built, and edit one tool's schema, and check that every tool still describes and validates
its own function.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import pytest

from agentkit import Toolkit
from agentkit.messages import ToolUseBlock
from agentkit.tools._function import FunctionTool


def _register(fn: Callable[..., object], **kwargs: object) -> FunctionTool:
    tool = Toolkit().register_tool_function(fn, **kwargs)  # type: ignore[arg-type]
    assert isinstance(tool, FunctionTool)
    return tool


def _factory(user: str, default: object) -> Callable[..., str]:
    def lookup(q: str, n: int = default) -> str:  # type: ignore[assignment]
        """Look something up.

        Args:
            q: The query.
            n: How many.
        """
        return f"{user}:{q}:{n!r}"

    return lookup


def test_a_docstring_changed_after_registration_is_seen() -> None:
    def tool(x: int) -> int:
        """Old words."""
        return x

    assert _register(tool).description == "Old words."
    tool.__doc__ = "New words."
    assert _register(tool).description == "New words."


def test_defaults_and_annotations_changed_after_registration_are_seen() -> None:
    def tool(x: int) -> int:
        return x

    assert _register(tool).parameters["required"] == ["x"]
    tool.__defaults__ = (5,)
    properties = _register(tool).parameters["properties"]
    assert properties == {"x": {"type": "integer", "default": 5}}
    tool.__annotations__["x"] = str
    properties = _register(tool).parameters["properties"]
    assert properties == {"x": {"type": "string", "default": 5}}


def test_a_signature_set_after_registration_is_seen() -> None:
    def tool(**kwargs: object) -> str:
        return str(kwargs)

    _register(tool)
    keyword = inspect.Parameter.KEYWORD_ONLY
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("city", keyword, annotation=str)]
    )
    assert list(_register(tool).parameters["properties"]) == ["city"]  # type: ignore[call-overload]


def test_closures_whose_defaults_are_equal_but_of_another_type_do_not_share() -> None:
    # 1 == True == 1.0 in Python, but each is its own JSON default.
    tools = [_register(_factory(u, d)) for u, d in (("a", 1), ("b", True), ("c", 1.0))]
    defaults = [t.parameters["properties"]["n"]["default"] for t in tools]  # type: ignore[index]
    assert [type(d) for d in defaults] == [int, bool, float]


async def test_a_function_whose_code_was_replaced_is_described_again() -> None:
    # What a hot reload does (IPython's autoreload swaps ``__code__`` in place): here only
    # the code changes (``x`` becomes positional-only), so the spec's calling convention must.
    def tool(x: int) -> str:
        return f"got {x}"

    def reloaded(x: int, /) -> str:
        return f"now {x}"

    assert _register(tool).spec.positional == ()
    tool.__code__ = reloaded.__code__
    again = _register(tool)
    assert again.spec.positional == ("x",)
    toolkit = Toolkit()
    toolkit.register_tool(again)
    block = ToolUseBlock(type="tool_use", id="1", name="tool", input={"x": 1})
    assert (await toolkit.execute(block)).get_text() == "now 1"


class _Account:
    def __init__(self, owner: str, fee: int = 1) -> None:
        self.owner, self.fee = owner, fee

    def balance(self, currency: str) -> str:
        """The balance.

        Args:
            currency: The currency.
        """
        return f"{self.owner}:{currency}"

    def __call__(self, amount: int) -> str:
        """Pay."""
        return f"{self.owner} pays {amount + self.fee}"


def _decorated(tag: str) -> Callable[[Callable[..., str]], Callable[..., str]]:
    def decorate(fn: Callable[..., str]) -> Callable[..., str]:
        @functools.wraps(fn)
        def wrapper(*args: object, **kwargs: object) -> str:
            return f"{tag}:{fn(*args, **kwargs)}"

        return wrapper

    return decorate


@pytest.mark.parametrize(
    ("make", "arguments", "expected"),
    [
        (lambda who: _Account(who).balance, {"currency": "EUR"}, "{who}:EUR"),
        (lambda who: _Account(who), {"amount": 2}, "{who} pays 3"),
        (lambda who: functools.partial(_Account(who).balance), {"currency": "X"}, "{who}:X"),
        (lambda who: lambda q: f"{who}/{q}", {"q": "z"}, "{who}/z"),
    ],
    ids=["bound methods", "callable objects", "partials", "lambdas"],
)
async def test_each_tool_calls_its_own_callable(
    make: Callable[[str], Callable[..., object]], arguments: dict[str, object], expected: str
) -> None:
    for who in ("alice", "bob"):
        tool = _register(make(who), name="t")
        toolkit = Toolkit()
        toolkit.register_tool(tool)
        block = ToolUseBlock(type="tool_use", id="1", name="t", input=arguments)
        assert (await toolkit.execute(block)).get_text() == expected.format(who=who)


def test_decorated_functions_are_described_by_what_they_wrap() -> None:
    def first(city: str) -> str:
        """Weather of a city."""
        return city

    def second(city: str, days: int = 1) -> str:
        """Forecast for a city."""
        return city

    one = _register(_decorated("a")(first))
    two = _register(_decorated("a")(second))  # the same wrapper code, other wrapped
    assert (one.description, list(one.parameters["properties"])) == (  # type: ignore[call-overload]
        "Weather of a city.",
        ["city"],
    )
    assert (two.description, list(two.parameters["properties"])) == (  # type: ignore[call-overload]
        "Forecast for a city.",
        ["city", "days"],
    )


def _made(source: str, name: str, namespace: dict[str, object]) -> Callable[..., object]:
    exec(compile(source, "<made>", "exec"), namespace)
    made = namespace[name]
    assert callable(made)
    return made


def test_specs_of_code_made_at_run_time_are_not_kept_alive_forever() -> None:
    import gc
    import weakref

    from agentkit.tools import _schema

    made = _made("def made(x: int) -> int:\n    return x\n", "made", {})
    code = weakref.ref(made.__code__)  # type: ignore[attr-defined]
    _register(made)
    del made
    for i in range(_schema._MAX_SPECS):  # other functions push its spec out
        _register(_made(f"def made{i}(x: int) -> int:\n    return x\n", f"made{i}", {}))
    gc.collect()
    assert code() is None


@pytest.mark.parametrize(
    "header",
    ["from __future__ import annotations\n", ""],
    ids=["string annotations", "a quoted forward reference"],
)
def test_a_name_rebound_in_the_module_is_resolved_again(header: str) -> None:
    annotation = "list[Kind]" if header else "list['Kind']"
    source = f"{header}def tool(x: {annotation}) -> str:\n    return ''\n"
    namespace: dict[str, object] = {"Kind": int}
    tool = _made(source, "tool", namespace)
    properties = _register(tool).parameters["properties"]
    assert properties == {"x": {"items": {"type": "integer"}, "type": "array"}}
    namespace["Kind"] = str
    properties = _register(tool).parameters["properties"]
    assert properties == {"x": {"items": {"type": "string"}, "type": "array"}}


def test_a_mutable_default_changed_after_registration_is_seen() -> None:
    def tool(tags: list[str] = ["a"]) -> str:  # noqa: B006 - the point of the test
        return ",".join(tags)

    first = _register(tool)
    assert tool.__defaults__ is not None
    tool.__defaults__[0].append("b")
    properties = _register(tool).parameters["properties"]
    assert properties["tags"]["default"] == ["a", "b"]  # type: ignore[index]
    assert first.parameters["properties"]["tags"]["default"] == ["a"]  # type: ignore[index]
