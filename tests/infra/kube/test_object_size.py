"""What the program would register for hostile profiles: objects the Kubernetes API would not
store are refused before anything is registered or rendered, naming the profile and the object;
names cut to fit GCP stay apart."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from cli_support import copy_repo, edit_yaml
from repo import REPO

from infra.cli.render import render_model
from infra.deploy.preview import record
from infra.platform.config import Stack, load_stack
from infra.platform.plan import compile_stack, plan_platform, stack_model_objects
from serving.errors import ServestackError
from serving.spec.limits import ANNOTATIONS_BYTES_MAX, size_problems
from serving.spec.names import GCP_ACCOUNT_ID


def _oversized_dev_stack() -> tuple[Stack, str]:
    stack = load_stack("dev", REPO)
    (model, spec) = next(iter(stack.profiles.items()))
    # Built in Python, past the file size limit a profile on disk meets first.
    huge = spec.model_copy(update={"env": {"PADDING": "x" * (ANNOTATIONS_BYTES_MAX + 1)}})
    return replace(stack, profiles={model: huge}), model


def test_an_oversized_rayservice_stops_the_platform_plan_naming_the_profile() -> None:
    stack, model = _oversized_dev_stack()
    with pytest.raises(ServestackError) as caught:
        plan_platform(stack, judge_layouts=False)
    message = caught.value.render()
    assert f"stacks/models/{model}.yaml: RayService llama-3-1-8b: " in message
    assert "bytes of annotations; Kubernetes allows 262,144" in message


def test_an_oversized_model_renders_nothing(tmp_path: Path) -> None:
    stack, model = _oversized_dev_stack()
    compiled = compile_stack(stack)[model]
    with pytest.raises(ServestackError):
        render_model(stack_model_objects(stack, model, compiled), model, stack, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_configmap_over_a_mebibyte_is_refused() -> None:
    big = {"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "x" * 2**20}}
    assert any("holds" in problem for problem in size_problems(big))


def test_an_object_over_the_etcd_request_limit_is_refused() -> None:
    big = {"kind": "RayService", "metadata": {"name": "x"}, "spec": {"s": "x" * (1536 * 1024)}}
    assert any("the Kubernetes API stores" in problem for problem in size_problems(big))


def test_two_long_gcs_model_names_get_two_weight_reader_accounts(tmp_path: Path) -> None:
    """Cut to 30 characters, both names would be one GCP service account, and each model's
    bucket would grant the other model's pods; the hash of the whole name keeps them apart."""
    root = copy_repo(tmp_path / "repo")
    served = ["qwen3-coder-480b-a35b-instruct-long", "qwen3-coder-480b-a35b-instruct-short"]
    for name in served:
        profile = yaml.safe_load((root / "stacks/models/llama-3.1-8b.yaml").read_text())
        profile.update(name=name, source=f"gs://weights-{name[-5:]}/llama")
        (root / f"stacks/models/{name}.yaml").write_text(yaml.safe_dump(profile))
    edit_yaml(
        root / "stacks/Pulumi.dev.yaml",
        lambda d: d["config"].update({"servestack:models": served}),
    )
    accounts = [
        r.inputs["accountId"]
        for r in record("dev", root)
        if r.type == "gcp:serviceaccount/account:Account" and "weights-reader" in r.name
    ]
    assert len(accounts) == 2 and len(set(accounts)) == 2, accounts
    assert all(GCP_ACCOUNT_ID.fullmatch(account) for account in accounts)
