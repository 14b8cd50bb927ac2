"""One vocabulary of reasons (pulpie_spark/reasons.py), all of it documented."""

from __future__ import annotations

import ast

from helpers_data import ROOT

from pulpie_spark import reasons


def test_every_reason_is_documented_in_reliability_md():
    doc = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    missing = [f"{name}={value!r}" for name, value in reasons.ALL.items() if f"`{value}" not in doc]
    assert not missing, f"reasons not in docs/reliability.md: {missing}"


def _code_strings(source: str) -> set[str]:
    """String constants of the code (docstrings left out: they may name a reason)."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings}


def test_reason_strings_are_spelled_only_in_reasons_py():
    """No other module writes a reason literal of its own (guards, stages, curate use the names)."""
    # http_status is also the name of an ingest column, which modules rightly spell.
    spelled = {v for v in reasons.ALL.values() if len(v) > 6} - {reasons.SKIP_HTTP_STATUS}
    offenders = []
    for path in (ROOT / "pulpie_spark").rglob("*.py"):
        if path.name == "reasons.py":
            continue
        found = _code_strings(path.read_text(encoding="utf-8")) & spelled
        offenders += [f"{path.relative_to(ROOT)}: {value!r}" for value in sorted(found)]
    assert not offenders, offenders


def test_prefixed_does_not_double_a_prefix():
    assert reasons.prefixed(reasons.FALLBACK_FAILED_PREFIX, "timeout") == "fallback_failed:timeout"
    assert reasons.prefixed(reasons.FALLBACK_FAILED_PREFIX, "fallback_failed:x") == "fallback_failed:x"
