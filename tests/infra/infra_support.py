"""Helpers for infra tests: a recording Pulumi mock engine, running a program under it, and
copies of the repository's stacks to break. Fixtures using them live in conftest.py.

Inputs reach the recorder as the engine sends them: camelCase keys, numbers as floats.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pulumi
import yaml
from pulumi.runtime import settings
from pulumi.runtime.sync_await import _sync_await

from infra.deploy.preview import ProgramMocks, ensure_event_loop

PROJECT = "servestack"

# Secrets as `pulumi config set --secret` would hand them to the program. Distinctive, so a test
# can search every registered input for them.
TEST_HF_TOKEN = "hf_servestackTestTokenNotReal0123"
TEST_API_KEY = "sk-servestack-test-key-not-real-4567"
TEST_TLS_KEY = (
    "-----BEGIN PRIVATE KEY-----\nservestackTestKeyNotReal89\n-----END PRIVATE KEY-----\n"
)
TEST_TLS_CERT = "-----BEGIN CERTIFICATE-----\nservestackTestCert\n-----END CERTIFICATE-----\n"
TEST_SECRETS = {
    "servestack:api_keys": json.dumps([TEST_API_KEY]),
    "servestack:tls_cert": TEST_TLS_CERT,
    "servestack:tls_key": TEST_TLS_KEY,
    "servestack:hf_token": TEST_HF_TOKEN,
}
# The AUTH string Memorystore generates, as the mock engine answers it.
TEST_REDIS_AUTH = "servestack-test-redis-auth-not-real"
SECRET_VALUES = (TEST_HF_TOKEN, TEST_API_KEY, "servestackTestKeyNotReal89", TEST_REDIS_AUTH)
T = TypeVar("T")


@dataclass(frozen=True)
class Registered:
    type: str
    name: str
    inputs: dict[str, Any]
    custom: bool


class RecordingMocks(ProgramMocks):
    """The preview's mock answers (inputs, plus the outputs GCP computes that the program
    reads), recording every registered resource."""

    def __init__(self) -> None:
        self.registered: list[Registered] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.registered.append(Registered(args.typ, args.name, dict(args.inputs), args.custom))
        resource_id, outputs = super().new_resource(args)
        if args.typ == "gcp:redis/instance:Instance":
            outputs["authString"] = TEST_REDIS_AUTH
        return resource_id, outputs

    def of_type(self, type_token: str) -> list[Registered]:
        return [r for r in self.registered if r.type == type_token]

    def one(self, type_token: str) -> Registered:
        (found,) = self.of_type(type_token)
        return found


def use_stack(recorder: RecordingMocks, stack: str, config: dict[str, str]) -> None:
    """Point the mock engine at a fresh root stack named `stack` with this config, with
    `preview=False` so that `apply` callbacks run (under a preview they never do, and
    assertions inside them would pass without checking anything)."""
    ensure_event_loop()
    settings.ROOT.set(None)  # set_mocks creates a new root stack only when there is none
    pulumi.runtime.set_all_config(config, secret_keys=[k for k in config if k in TEST_SECRETS])
    pulumi.runtime.set_mocks(recorder, project=PROJECT, stack=stack, preview=False)


def run(program: Callable[[], T]) -> T:
    """Run `program` as Pulumi runs a program and wait until every resource is registered."""
    result: list[T] = []

    @pulumi.runtime.test
    def _program() -> None:
        result.append(program())

    _program()
    return result[0]


def resolve(output: pulumi.Output[T]) -> tuple[T, bool]:
    """An output's value and whether it is secret, once `run` has finished."""
    value: T = _sync_await(output.future())
    secret: bool = _sync_await(output.is_secret())
    return value, secret


# (min nodes, max nodes, a replica spans nodes) per GPU machine type of each shipped stack, worked
# out by hand from its profiles; max nodes include room for a RayService upgrade's new cluster at
# the largest model's minimum.
# dev: llama-3.1-8b, tensor 1, on a3-highgpu-1g (one GPU a node): replicas 1-2 take 1-2 nodes,
#   + 1 node of upgrade room.
# prod: on a3-highgpu-8g, llama-3.3-70b-fp8 at tensor 2 packs 4 replicas a node: 4-8 replicas take
#   1-2 nodes; qwen3-30b-a3b at data 8 takes a node a replica: 1-2 nodes. 2-4 nodes, + 1 of room.
PLANNED_POOLS: dict[str, dict[str, tuple[int, int, bool]]] = {
    "dev": {"a3-highgpu-1g": (1, 3, False)},
    "prod": {"a3-highgpu-8g": (2, 5, False)},
}
# The capacity chain of each shipped stack's machine type, as its stack file orders it: one node
# pool per step, each from 0 to the pool's max nodes (the class keeps the minimum up on whichever
# step has room).
PLANNED_CHAINS: dict[str, dict[str, tuple[str, ...]]] = {
    "dev": {"a3-highgpu-1g": ("spot", "flex_start")},
    "prod": {"a3-highgpu-8g": ("reservation", "flex_start", "on_demand")},
}


def pulumi_config(stack_file: Path) -> dict[str, str]:
    """A stack file's config as the Pulumi engine hands it to a program: every value text,
    arrays and mappings as JSON, with the secrets a real stack would hold."""
    config = yaml.safe_load(stack_file.read_text())["config"]
    plain = {
        key: value if isinstance(value, str) else json.dumps(value) for key, value in config.items()
    }
    return plain | TEST_SECRETS


# Pulumi's wire marker for a secret value: {SIG: SECRET_SIG, "value": ...}.
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


def unwrap_secrets(value: Any) -> Any:
    """Registered inputs with every secret replaced by its value, as a manifest would carry it."""
    if isinstance(value, dict):
        if SECRET_SIG in value.values():
            return unwrap_secrets(value["value"])
        return {k: unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(v) for v in value]
    return value
