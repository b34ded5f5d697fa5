"""Credentials by value: one detector for profiles, container environments and Serve configs,
with no false positive on what the shipped stacks compile to."""

from __future__ import annotations

import pytest
import yaml
from repo import REPO

from infra.platform.config import available_stacks, load_stack
from infra.platform.plan import compile_stack, stack_model_objects
from serving.spec.secrets import credential_in, find_credentials

# Assembled at run time so that no credential-shaped string sits in the repository.
CREDENTIALS = {
    "Hugging Face": "hf_" + "xVb3Nq8TzLp2Rk5Wm9Yc4Hd7Js1Fg6Qa0",
    "OpenAI-style": "sk-" + "proj-" + "Zq7Rk2Wm" * 4,
    "AWS": "AKIA" + "IOSFODNN7EXAMPLE",
    "Google API": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
    "GitHub": "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
    "PEM": "-----BEGIN " + "PRIVATE KEY-----\nMIIE...\n",
    "URL password": "redis://default:" + "s3cr3t" + "@redis.example:6379",
}


@pytest.mark.parametrize("kind", sorted(CREDENTIALS))
def test_a_known_credential_format_is_found_under_any_name(kind: str) -> None:
    assert credential_in(CREDENTIALS[kind], "MY_SETTING") is not None


def test_a_random_string_under_a_key_like_name_is_a_secret() -> None:
    assert credential_in("q8Z2xR7mK4pW9vL3", "api_key") is not None
    assert credential_in("q8Z2xR7mK4pW9vL3", "dtype") is None


def test_a_label_key_of_words_is_no_secret_but_a_random_one_under_a_domain_is() -> None:
    """A toleration's `key` names a taint: words under a domain, however varied its letters."""
    assert credential_in("cloud.google.com/compute-class", "key") is None
    assert credential_in("cloud.google.com/q8Z2xR7mK4pW9vL3", "key") is not None


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        ("qwen3-30b-a3b-import", False),  # an imported architecture's key is its served name
        ("mixtral-8x7b-instruct-v0-1", False),
        ("deepseek-v3-2-exp-import", False),
        ("f47ac10b-58cc-4372-a567-0e02b2c3d479", True),  # a UUID: segments alternate, no word
        ("a1b2-c3d4-e5f6-g7h8", True),  # short segments, but not one word among them
        ("q8z2xr7mk4pw9vl3-serving", True),  # a segment longer than a name's
    ],
)
def test_a_hyphenated_name_under_key_is_no_secret_but_a_generated_key_is(
    value: str, secret: bool
) -> None:
    assert (credential_in(value, "key") is not None) is secret


def test_a_credential_nested_anywhere_is_found_with_its_path() -> None:
    found = list(find_credentials({"a": [{"b": CREDENTIALS["Hugging Face"]}]}))
    assert found == [("a.0.b", "a Hugging Face token")]


@pytest.mark.parametrize(
    "value", ["meta-llama/Llama-3.1-8B-Instruct", "serving.router.prefix_affinity:X", "1"]
)
def test_ordinary_values_are_not_credentials(value: str) -> None:
    assert credential_in(value, "model_source") is None


@pytest.mark.parametrize("stack", available_stacks(REPO))
def test_no_false_positive_on_what_the_shipped_stacks_compile_to(stack: str) -> None:
    loaded = load_stack(stack, REPO)
    for profile, model in compile_stack(loaded).items():
        for manifest in stack_model_objects(loaded, profile, model).manifests:
            assert list(find_credentials(manifest)) == []
            serve = (manifest.get("spec") or {}).get("serveConfigV2")
            if serve:
                assert credential_in(serve) is None
                assert list(find_credentials(yaml.safe_load(serve))) == []
