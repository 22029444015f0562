"""``fit`` builds a response entity for one version: fields that version lacks are dropped, unknown names refused.

The handlers' source is read too: every keyword a handler passes to ``fit`` or to a ``nested`` class names a field
that some version of the message has, so a misspelt field fails here rather than on the one path that runs it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema

from odradek.broker.api_registry import load_apis
from odradek.broker.apis import NO_THROTTLE, _fields_in_any_version, fit
from odradek.errors import ErrorCode

HEARTBEAT = 12


def test_fit_drops_a_field_the_version_lacks() -> None:
    v0, v1 = load_response_schema(HEARTBEAT, 0), load_response_schema(HEARTBEAT, 1)
    assert fit(v0, throttle_time=NO_THROTTLE, error_code=ErrorCode.none) == v0(error_code=ErrorCode.none)
    assert fit(v1, throttle_time=NO_THROTTLE, error_code=ErrorCode.none) == v1(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none)


def test_fit_refuses_a_name_no_version_has() -> None:
    with pytest.raises(TypeError, match="throttle_time_ms"):
        fit(load_response_schema(HEARTBEAT, 1), throttle_time_ms=NO_THROTTLE, error_code=ErrorCode.none)
    with pytest.raises(TypeError, match="eror_code"):
        fit(load_response_schema(HEARTBEAT, 0), eror_code=ErrorCode.none)


def _entity_calls(tree: ast.AST) -> list[tuple[ast.Call, str | None]]:
    """Calls building a response entity: ``fit(ctx.response_class, ...)`` (None) and calls of ``nested(ctx, "X")``."""
    found: list[tuple[ast.Call, str | None]] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        aliases: dict[str, str] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and _nested_name(node.value):
                aliases.update({t.id: _nested_name(node.value) for t in node.targets if isinstance(t, ast.Name)})
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id == "fit" and node.args and \
                    ast.unparse(node.args[0]) == "ctx.response_class":
                found.append((node, None))
            elif isinstance(node.func, ast.Name) and node.func.id in aliases:
                found.append((node, aliases[node.func.id]))
            elif _nested_name(node.func):
                found.append((node, _nested_name(node.func)))
    return found


def _nested_name(node: ast.AST) -> Any:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "nested" and \
            len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
        return node.args[1].value
    return None


def test_every_keyword_a_handler_passes_names_a_field() -> None:
    unknown = []
    checked = 0
    for key, module in sorted(load_apis().items()):
        if module.API_KEY in (4, 5, 6, 7):  # the controller's requests: hand-written codecs, no kio responses
            continue
        newest = load_response_schema(key, module.MAX_VERSION)
        schema = sys.modules[newest.__module__]
        path = Path(module.__file__ or "")
        for call, name in _entity_calls(ast.parse(path.read_text())):
            cls = newest if name is None else getattr(schema, name)
            known = _fields_in_any_version(cls)
            checked += 1
            unknown += [f"{path.name}:{call.lineno} {cls.__name__}.{kw.arg}" for kw in call.keywords
                        if kw.arg is not None and kw.arg not in known]
    assert checked > 100  # the scan finds the handlers' calls
    assert unknown == []
