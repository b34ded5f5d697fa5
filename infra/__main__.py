"""The Pulumi program: one stack's GKE platform and serving plane, from its config and plans.

`pulumi up` runs this file. Everything is planned and checked (`plan_platform`) before the first
resource is registered; bad config ends the run with one message naming the file, key and fix.
`infra.deploy.program.build` composes the resources.
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from infra.deploy.program import build
from infra.platform.config import load_pulumi_secrets, load_pulumi_stack, project_root
from infra.platform.plan import plan_platform
from serving.errors import ServestackError


def main() -> None:
    try:
        stack = load_pulumi_stack(project_root(Path(__file__).parent))
        platform = plan_platform(stack)
    except ServestackError as exc:
        # RunError ends the program with the message alone, without Pulumi's traceback.
        raise pulumi.RunError(exc.render()) from None
    build(stack, platform, load_pulumi_secrets())


if __name__ == "__main__":
    main()
