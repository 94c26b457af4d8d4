"""The README is a contract a newcomer reads in five minutes, and no record names a commit hash.

The README stays at most 12 KiB, names the two commands (`make run`, `make test`), and every
relative link in it, or in the docs its detail moved to, reaches a file, and each `#anchor` a
heading there (GitHub's slugs).

No commit hash in README.md, in `data/**/*.json` or `data/**/*.md`, or in `tests/**/*.py`:
rewording history once rewrote every hash they held, so a record names the workbook that ran by
its commit's date and subject instead (docs/ may keep hashes). The rule: a commit hash is a run of
7 to 40 lowercase hex digits with at least one digit and one letter a-f, standing alone (no word
character or '.' before it, no word character after it, and not the mantissa of a float such as
`9e+09`). What is not one: a sha256 digest (64 digits: longer than 40, so never matched; a
shortened one written after the word "sha256" within 40 characters), a number (no letter), a
word such as "decade" (no digit), and the few other projects' revisions in `OTHER_PROJECTS`, each
with its reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.common.paths import DATA_DIR, REPO_ROOT
from kit import chapters

README = REPO_ROOT / "README.md"
#: The docs that hold what the README held before it became a five-minute contract.
README_DOCS = ("commands", "gpu", "layout", "measurements", "tiny-pair", "tokenizer")
#: A five-minute read.
MAX_README_BYTES = 12 * 1024
#: 7-40 lowercase hex digits with a digit and a letter, standing alone, not a float's mantissa.
COMMIT_HASH = re.compile(
    r"(?<![\w.])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?!\w|[+-]\d)"
)
#: How far before a shortened digest the word "sha256" may stand.
SHA256_CONTEXT = 40
#: Other projects' revisions, which no rewording of this repository's history changes.
OTHER_PROJECTS = {
    "3737e4137": "llama.cpp's build, as the published source names it (data/published/)",
    # the commits each engine's acceptance definition was read at (acceptance-definitions.json)
    "c05b95b": "vllm-project/speculators, its perf_utils.py",
    "00df707": "sgl-project/sglang, its scheduler's metrics_reporter.py",
    "9155cf0": "sgl-project/sglang, its spec_decoding_meta.py",
    "a6b6b02": "sgl-project/SpecForge, its benchmarker utils.py",
    "0123456789abcdef0123456789abcdef01234567": "a made-up hub snapshot in a prefetch fixture",
    # the revisions a published number was read at, in its source's permalink (data/published/)
    "21bdec8ae04ac26d3de57a3e09220a568c890ad3": "Li-changwu/MoE-SD: the ablation and routing trace",
    "fdc682d97b5bf1d3a9254f02e2343ea951ad9112": "Li-changwu/MoE-SD: the concurrent and pilot sweeps",
    "21a395c0cb724d2ac075a937b51c1974fa7b4824": "Li-changwu/MoE-SD: the baseline bench (later deleted)",
    "d9952d16004c94d0c01f71e13e11f1e5ad12b21d": "sgl-project/SpecForge: SpecBundle's data.json",
    "88fe50c50c529f17c4dcbcb46fb7a46ea2a825b0": "sgl-project/sgl-cookbook: its SpecBundle page",
}
LINK = re.compile(r"\]\(([^)\s]+)\)")


def commit_hashes(text: str) -> list[str]:
    """The commit hashes in text, by the module's rule."""
    found = []
    for match in COMMIT_HASH.finditer(text):
        before = text[max(0, match.start() - SHA256_CONTEXT) : match.start()]
        if "sha256" not in before.lower() and match[0] not in OTHER_PROJECTS:
            found.append(match[0])
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a markdown file's headings (fenced code skipped)."""
    text = re.sub(r"(?ms)^\s*```.*?^\s*```", "", path.read_text())
    return {slug(h) for h in re.findall(r"(?m)^#{1,6} (.+)$", text)}


def broken_links(path: Path) -> list[str]:
    """Relative links in a markdown file whose file or heading does not exist."""
    broken = []
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        name, _, anchor = target.partition("#")
        linked = (path.parent / name).resolve() if name else path
        if not linked.exists():
            broken.append(target)
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(target)
    return broken


def records() -> list[Path]:
    """README.md, the JSON and markdown files of data/ and of each chapter's data/, and the tests
    (tests/ and each chapter's tests/)."""
    chapter_data = [
        p for d in (REPO_ROOT / "src" / "chapters").glob("*/data") for p in d.rglob("*")
    ]
    files = [README, *DATA_DIR.rglob("*.json"), *DATA_DIR.rglob("*.md")]
    files += sorted(p for p in chapter_data if p.suffix in {".json", ".md"})
    tests = [
        *(REPO_ROOT / "tests").rglob("*.py"),
        *(REPO_ROOT / "src" / "chapters").glob("*/tests/*.py"),
    ]
    return files + sorted(tests)


def test_the_readme_is_a_five_minute_read() -> None:
    size = len(README.read_bytes())
    assert size <= MAX_README_BYTES, f"README.md is {size} bytes: move detail into docs/"


def test_the_readme_names_the_two_commands() -> None:
    block = re.search(r"```bash\n(.*?)```", README.read_text(), re.S)
    assert block, "README.md has no bash block with the commands"
    commands = [line.split("#")[0].strip() for line in block[1].splitlines()]
    assert {"make run", "make test"} <= set(commands), commands


@pytest.mark.parametrize("doc", ["README.md", *(f"docs/{n}.md" for n in README_DOCS)])
def test_every_relative_link_resolves(doc: str) -> None:
    assert not broken_links(REPO_ROOT / doc), f"{doc}: {broken_links(REPO_ROOT / doc)}"


def test_no_commit_hash_in_the_readme_data_or_tests() -> None:
    found = [
        f"{p.relative_to(REPO_ROOT)}: {h}" for p in records() for h in commit_hashes(p.read_text())
    ]
    hint = "name a run by its date and what it measured, not a hash"
    assert not found, hint + ":\n" + "\n".join(found)


@pytest.mark.whole_workbook
def test_other_projects_revisions_are_still_there() -> None:
    here = Path(__file__).resolve()
    texts = "".join(p.read_text() for p in records() if p.resolve() != here)
    assert all(rev in texts for rev in OTHER_PROJECTS), "drop the entries nothing holds"


def test_the_hash_rule_catches_a_planted_hash_and_spares_the_rest() -> None:
    short, full = f"{0xE85E3D1:x}", f"{0x9F3A1C2B7D:040x}"
    for planted in (f"workbook {short}: the lab", f"a fresh clone of {short}", f"rev {full}"):
        assert commit_hashes(planted), planted
    for innocent in (
        "sha256 " + "af125ed4" * 8,
        "tokenizer.json (sha256 `aeb13307…2dae4`, Qwen3's file",
        "1.7960575305227275e+09",
        "kv_cache_memory_bytes 4294967296",
        "a decade of defaced records",
        "Qwen3-30B-A3B, page 0x1f2e3d4c",
    ):
        assert not commit_hashes(innocent), innocent


def test_a_broken_link_or_anchor_is_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "gpu.md").write_text("# Running on a GPU\n\n## The H200: a lab\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/gpu.md#the-h200-a-lab) [web](https://example.org/x) [self](#top)\n"
        "[gone](docs/none.md) [bad anchor](docs/gpu.md#the-h100)\n\n# Top\n"
    )
    assert broken_links(page) == ["docs/none.md", "docs/gpu.md#the-h100"]


def readme_notebook_rows(text: str) -> dict[str, tuple[str, str, str]]:
    """Notebook file name -> the README notebook table's (number, 'you will', 'N s · M GiB')."""
    rows = {}
    for line in text.splitlines():
        match = re.match(r"^\| (\d\d) \| `(\w+)` \| (.*) \| ([^|]+) \|$", line)
        if match:
            rows[f"{match[2]}.ipynb"] = (match[1], match[3].strip(), match[4].strip())
    return rows


def readme_run_times(text: str) -> dict[str, str]:
    """Notebook file name -> the README notebook table's 'N s · M GiB' cell."""
    return {name: row[2] for name, row in readme_notebook_rows(text).items()}


def test_the_readme_rows_are_the_chapters() -> None:
    """One README row per chapter (a fork that drops one deletes its row): its number, notebook
    and 'you will' as its chapter.json declares them."""
    declared = {c.notebook: (c.number, c.readme) for c in chapters.discover()}
    shown = readme_notebook_rows(README.read_text())
    assert {name: row[:2] for name, row in shown.items()} == declared


def test_the_readme_run_times_are_the_records() -> None:
    """The README's notebook table has one row per chapter's notebook, and every time and peak in
    it is the record's (data/measurements/cpu-notebook-runs.json, which `python -m kit.agenda
    record` rewrites)."""
    import json

    present = sorted(c.notebook for c in chapters.discover())
    record = json.loads((DATA_DIR / "measurements" / "cpu-notebook-runs.json").read_text())
    expected = {
        row["notebook"]: f"{row['seconds']:,.0f} s · {row['peak_gib']:.1f} GiB"
        for row in record["notebooks"]
        if row["notebook"] in present
    }
    shown = readme_run_times((REPO_ROOT / "README.md").read_text())
    assert sorted(shown) == present, "the README's notebook table and the chapters differ"
    assert shown == expected


def test_the_run_time_reader_sees_a_changed_cell() -> None:
    row = "| 01 | `01_x` | you will | 10 s · 0.7 GiB |"
    assert readme_run_times(row) == {"01_x.ipynb": "10 s · 0.7 GiB"}
    assert readme_run_times(row.replace("10 s", "11 s")) != {"01_x.ipynb": "10 s · 0.7 GiB"}
