"""Names a model takes in Kubernetes and GCP: derived in one place, valid where they go, and
never shared by two models."""

from __future__ import annotations

import pytest

from serving.spec import names


def test_a_long_name_cut_to_a_gcp_account_id_keeps_a_hash_of_the_whole_name() -> None:
    first = "qwen3-coder-480b-a35b-instruct-fp8-long-context"
    second = "qwen3-coder-480b-a35b-instruct-fp8-short-context"
    ids = {names.gcp_account_id(first), names.gcp_account_id(second)}
    assert len(ids) == 2
    assert all(names.GCP_ACCOUNT_ID.match(account) for account in ids), ids


def test_a_short_name_keeps_its_plain_gcp_account_id() -> None:
    assert names.gcp_account_id("llama-3.1-8b") == "llama-3-1-8b-weights"


@pytest.mark.parametrize("served", ["a", "x.y", "l" * 47, "m-1.2.3"])
def test_every_derived_gcp_account_id_is_one_gcp_accepts(served: str) -> None:
    assert names.GCP_ACCOUNT_ID.match(names.gcp_account_id(served))


def test_names_that_differ_only_in_dots_collide_and_both_are_named() -> None:
    found = names.collisions({"dup-dot": "dup.1", "dup-dash": "dup-1"})
    kinds = {kind for kind, *_ in found}
    assert "RayService and Ingress" in kinds
    assert {(first, second) for _, _, first, second in found} == {("dup-dot", "dup-dash")}


def test_distinct_names_do_not_collide() -> None:
    assert names.collisions({"a": "llama-3.1-8b", "b": "llama-3.1-8b-pd"}) == []


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "x..", "A B", "", "x" * 64])
def test_a_profile_name_that_is_not_a_plain_file_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="is not a profile name"):
        names.check_profile_name(name)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "tp16-on-8-gpus", "qwen3_32b"])
def test_plain_profile_names_are_accepted(name: str) -> None:
    assert names.check_profile_name(name) == name
