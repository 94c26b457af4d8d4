"""Nothing happens at import: no environment writes, no file of the repository read, no CUDA, and
vLLM's engine stays unimported.

Each check runs in a fresh interpreter that imports every module of the trunk, the chapters and the
kit (the CLIs too; a chapter's tests/ aside), then
builds engine arguments for the tiny and the real-size profiles, as notebooks do before any engine starts.
CUDA is watched by replacing torch.cuda's entry points with recorders: on a GPU machine a call
there would initialise CUDA in the notebook's process, and vLLM then could not fork its engine
("Cannot re-initialize CUDA in forked subprocess").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT

#: It runs programs (kit.drop_check leaves it out: not a static check of the tree).
pytestmark = pytest.mark.process

#: Records every file opened under WATCHED_ROOT (an audit hook on "open"; Python sources, bytecode
#: and what Python writes into __pycache__/ (a .pyc goes through a temporary file when bytecode may
#: be written, as under make test), the interpreter's own files and the package metadata pip writes
#: into src/*.egg-info aside) while WATCH[0] is set, in OPENED.
OPEN_WATCH = r"""
import os, sys
OPENED, WATCH = [], [False]
def _watch(event, args, root=os.path.abspath(WATCHED_ROOT) + os.sep, skip=(sys.prefix + os.sep,)):
    if not WATCH[0] or event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.path.abspath(os.fsdecode(args[0]))
    metadata = ".egg-info" + os.sep in path or os.sep + "__pycache__" + os.sep in path
    if path.startswith(root) and not path.startswith(skip) and not path.endswith((".py", ".pyc")) \
            and not metadata:
        OPENED.append(os.path.relpath(path, root))
sys.addaudithook(_watch)
"""

PROBE = r"""
import importlib, json, os, pkgutil, sys
import torch
import torch._dynamo  # third-party: sets TORCHINDUCTOR_CACHE_DIR when first imported (by transformers)
calls = []
for name in ("is_available", "device_count", "init", "_lazy_init", "get_device_properties",
             "current_device", "mem_get_info"):
    if hasattr(torch.cuda, name):
        setattr(torch.cuda, name, lambda *a, _n=name, **k: calls.append(_n) or 0)
before = dict(os.environ)
import chapters, helpers, kit
modules = [
    m.name
    for package in (helpers, chapters, kit)
    for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
    if "tests" not in m.name.split(".")  # a chapter's own tests are tests, not modules
]
WATCH[0] = True
for name in modules:
    importlib.import_module(name)
WATCH[0] = False
after_import = dict(os.environ)
from helpers.common.profiles import load_profile
from helpers.engine.lifecycle import engine_kwargs
engine_kwargs(load_profile("tiny"), k=3)  # asks whether there is a GPU
import dataclasses
from helpers.common import qwen_tokenizer
from kit.qwen_tokenizer import PADDED_DIR

PROFILES = [load_profile("tiny")]
for name in ("qwen3-30b-a3b", "qwen3-30b-a3b-shape"):  # as a GPU machine builds them
    profile = load_profile(name)
    if profile.tokenizer and qwen_tokenizer.status(PADDED_DIR):  # not built here
        profile = dataclasses.replace(profile, tokenizer=None)
    PROFILES.append(profile)
    engine_kwargs(profile, k=3, gpu=True)
EXTRA
changed = sorted(k for k in set(before) | set(after_import) if before.get(k) != after_import.get(k))
print(json.dumps({"modules": len(modules), "env_changed": changed, "cuda_calls": calls,
                  "files_read": sorted(set(OPENED)),
                  "engine_imported": "vllm.v1.engine.llm_engine" in sys.modules}))
"""


def watched(code: str, root: Path) -> str:
    """`code` run after OPEN_WATCH, watching the files opened under `root`."""
    return OPEN_WATCH.replace("WATCHED_ROOT", repr(str(root))) + code


def probe(extra: str = "") -> dict:
    """Run PROBE in a fresh interpreter and return what it saw; `extra` runs after the engine
    arguments are built, with PROFILES (tiny, then the real-size two) at hand (a chapter's own
    calls made before an engine starts: its tests pass them)."""
    done = subprocess.run(
        [sys.executable, "-c", watched(PROBE.replace("EXTRA", extra), REPO_ROOT)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_imports_and_engine_kwargs_touch_nothing() -> None:
    seen = probe()
    assert seen["modules"] > 25
    assert seen["env_changed"] == [], f"os.environ written at import: {seen['env_changed']}"
    assert seen["files_read"] == [], f"files of the repository read at import: {seen['files_read']}"
    assert seen["cuda_calls"] == [], f"torch.cuda touched before vLLM starts: {seen['cuda_calls']}"
    assert not seen["engine_imported"]


def test_the_watch_sees_a_module_that_reads_a_file_at_import(tmp_path: Path) -> None:
    (tmp_path / "facts.json").write_text("{}")
    (tmp_path / "reads_at_import.py").write_text(
        "import pathlib\nFACTS = pathlib.Path(__file__).with_name('facts.json').read_text()\n"
    )
    (tmp_path / "reads_when_called.py").write_text(
        "import pathlib\ndef facts():\n    return pathlib.Path(__file__).with_name('x').read_text()\n"
    )
    code = (
        f"sys.path.insert(0, {str(tmp_path)!r})\nWATCH[0] = True\n"
        "import reads_at_import, reads_when_called\nWATCH[0] = False\nprint(OPENED)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", watched(code, tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['facts.json']"
