"""The instructor's and maintainer's kit: command-line tools no notebook imports, each run as
`python -m kit.<tool>`. chapters reads each chapter's declared record (chapter.json).

agenda (the instructors' agenda computed from the notebooks and a run record), doctor (will the
workbook run here?), preflight (can this machine run a profile?), prefetch (a hub profile's pair for
offline use), runner (make run) and its no-progress watchdog (watchdog; nbval_watchdog holds make
test's notebook cells to it), grader and its vLLM sampler reference (make check-exercises),
nbval_keep (pytest -p kit.nbval_keep: keep what nbval executed), nbval_queue (make test's two
lanes share the notebooks), manifest (data/'s sha256 list), the
tiny pair's recipes (tiny_recipe, tiny_tokenizer, tiny_verifier) and model cards, Qwen3's
tokenizer builder (qwen_tokenizer), text_quality (make bench's output checks), homes (how big
each home of the code is) and drop_check (drop each chapter in a scratch copy and check what is
left). A chapter's own tools (its GPU lab, its builders) live in its folder, under tools/.
"""

__all__ = [
    "agenda",
    "chapters",
    "doctor",
    "drop_check",
    "grader",
    "homes",
    "manifest",
    "model_cards",
    "nbval_keep",
    "nbval_queue",
    "nbval_watchdog",
    "prefetch",
    "preflight",
    "qwen_tokenizer",
    "runner",
    "sampler",
    "text_quality",
    "tiny_recipe",
    "tiny_tokenizer",
    "tiny_verifier",
    "watchdog",
]
