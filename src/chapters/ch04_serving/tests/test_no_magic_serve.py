"""Building a `vllm serve` command touches nothing either: no CUDA, as notebook 04 builds one
before any server starts (tests/test_no_magic.py's probe, with the chapter's own calls)."""

from __future__ import annotations

from tests.test_no_magic import probe

LAUNCH = """
from chapters.ch04_serving.server import launch_command
launch_command(PROFILES[0], k=3)
for profile in PROFILES[1:]:
    launch_command(profile, k=3, gpu=True)
"""


def test_building_a_serve_command_touches_no_cuda() -> None:
    seen = probe(LAUNCH)
    assert seen["cuda_calls"] == [], (
        f"torch.cuda touched before a server starts: {seen['cuda_calls']}"
    )
    assert seen["files_read"] == [], f"files of the repository read at import: {seen['files_read']}"
