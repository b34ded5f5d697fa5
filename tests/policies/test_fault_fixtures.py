"""Negative fixtures no stack file can express: a shipped stack's resources as the real program
registers them, edited as a hand-written manifest or another tool would (tests/policies/
negative/patches/), judged by the whole pack. Each is refused by the policy it names, which
passes the unedited stack."""

from __future__ import annotations

import copy
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.deploy.preview import Registered, judge, record
from policies.faults import FAULT_POLICIES
from policies.node_pools import NODE_POOL_POLICIES
from policies.pack import POLICIES

PATCHES = Path(__file__).parent / "negative" / "patches"
FIXTURES = sorted(PATCHES.glob("*.yaml"))


@cache
def registered(stack: str) -> tuple[Registered, ...]:
    return tuple(record(stack))


def _apply(inputs: dict[str, Any], edit: dict[str, Any]) -> None:
    path = edit.get("delete") or edit["set"]
    *parents, last = path
    node: Any = inputs
    for key in parents:
        node = node[key]
    if "delete" in edit:
        assert last in node, f"nothing to delete at {path}"
        del node[last]
    else:
        node[last] = edit["value"]


def edited(fixture: dict[str, Any]) -> list[Registered]:
    resources = []
    for resource in registered(fixture["stack"]):
        edits = [edit for edit in fixture["edits"] if edit["type"] == resource.type]
        if any(edit.get("drop") for edit in edits):
            continue
        if edits:
            inputs = copy.deepcopy(resource.inputs)
            for edit in edits:
                _apply(inputs, edit)
            resource = replace(resource, inputs=inputs)
        resources.append(resource)
    return resources


def mandatory(resources: list[Registered]) -> set[str]:
    return {v.policy for v in judge(resources, POLICIES) if v.enforcement == "mandatory"}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: path.stem)
def test_a_patched_stack_is_refused_by_its_policy(path: Path) -> None:
    fixture = yaml.safe_load(path.read_text())
    assert fixture["policy"] in {p.name for p in POLICIES}
    assert fixture["policy"] not in mandatory(list(registered(fixture["stack"])))
    assert fixture["policy"] in mandatory(edited(fixture))


def test_every_fault_policy_has_a_negative_fixture() -> None:
    """A fixture here or a negative stack under negative/stacks/ (test_preview.py)."""
    from test_preview import REFUSED_BY

    covered = {yaml.safe_load(p.read_text())["policy"] for p in FIXTURES} | set(REFUSED_BY.values())
    faults = {policy.name for policy in [*FAULT_POLICIES, *NODE_POOL_POLICIES]}
    assert faults <= covered
