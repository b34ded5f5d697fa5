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
from compiled_support import compile_spec
from pulumi.runtime import settings
from pulumi.runtime.sync_await import _sync_await

from infra.config import load_stack
from infra.preview import ProgramMocks, ensure_event_loop

REPO = Path(__file__).resolve().parents[2]
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


def planned_pools(root: Path, stack: str) -> dict[str, tuple[int, int, bool]]:
    """(min nodes, max nodes, a replica spans nodes) per machine type: the models' worker
    shapes (one pod per node) summed, as the pools must hold them, and room at the top for a
    RayService upgrade's new cluster at the largest model's minimum."""
    totals: dict[str, tuple[int, int, bool]] = {}
    upgrade_room: dict[str, int] = {}
    for spec in load_stack(stack, root).profiles.values():
        for shape in compile_spec(spec).worker_shapes:
            low, high, spans = totals.get(shape.machine_type, (0, 0, False))
            totals[shape.machine_type] = (
                low + shape.min_replicas,
                high + shape.max_replicas,
                spans or shape.nodes_per_replica > 1,
            )
            room = max(upgrade_room.get(shape.machine_type, 0), shape.min_replicas)
            upgrade_room[shape.machine_type] = room
    return {
        machine: (low, high + upgrade_room[machine], spans)
        for machine, (low, high, spans) in totals.items()
    }


def pulumi_config(stack_file: Path) -> dict[str, str]:
    """A stack file's config as the Pulumi engine hands it to a program: every value text,
    arrays and mappings as JSON, with the secrets a real stack would hold."""
    config = yaml.safe_load(stack_file.read_text())["config"]
    plain = {
        key: value if isinstance(value, str) else json.dumps(value) for key, value in config.items()
    }
    return plain | TEST_SECRETS
