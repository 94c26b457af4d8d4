"""Train the tiny verifier's EAGLE-3 drafter twice on the same rows from the same initial weights,
once with notebook 05's loop (`helpers.eagle3.train.train_drafter`) and once with speculators' own
trainer (`python -m speculators.train`, speculators 0.9.0), then measure both in vLLM beside the
shipped drafter: τ and per-position rates on the held-out workbook prompts and on HumanEval, in
vLLM CI's format (`helpers.analytics.benchmark.measure`). speculators' trainer needs a GPU (its
Trainer moves batches to CUDA device 0, `speculators/train/trainer.py`), so this runs on one.

    python -m chapters.ch05_drafter.tools.speculators_side_by_side --out build/speculators-side-by-side

Rows: notebook 05's recipe (its parameters cell: self-distilled answers of 100 prompts per
category, 30 % corpus rows, 384 tokens, seed 5), drawn once. speculators keeps the first 90 % of
its dataset for training (`train_data_ratio` must lie in (0, 1), `speculators/train/dataloader.py`),
so both trainers see exactly those rows, 16 per step, in the same order for the workbook and in
speculators' own sampler's order. Hidden states are the verifier's float32 taps (HF
`hidden_states[k]` for the aux layers, the last layer's output before the final norm), written as
speculators' cached-file format (`hs_{i}.safetensors`, `hs_connectors/transfer.py`).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

STEPS, BATCH, SEQ_LEN, TTT_STEPS, DECAY, LR, SEED = 300, 16, 384, 4, 0.8, 2e-3, 5
N_DISTILL, N_CORPUS, CORPUS_SHARE, TRAIN_RATIO, WARMUP = 100, 200, 0.3, 0.9, 20


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line arguments."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--out", type=Path, default=Path("build/speculators-side-by-side"))
    p.add_argument("--steps", type=int, default=STEPS, help="optimizer steps of each trainer")
    p.add_argument("--eval-prompts", type=int, default=None, help="held-out prompts per category")
    p.add_argument("--humaneval", type=int, default=None, help="HumanEval prompts (default all)")
    return p.parse_args(argv)


class ReplaySampler:
    """Fixed rows, `size` at a time in order (the workbook trainer's sampler over the same rows)."""

    def __init__(self, rows: torch.Tensor) -> None:
        self.rows, self.at = rows, 0

    def batch(self, size: int) -> torch.Tensor:
        """The next `size` rows."""
        out = self.rows[self.at : self.at + size]
        self.at += size
        return out


def draw_rows(n_rows: int, device: str) -> tuple[Any, Any, torch.Tensor, dict[str, Any]]:
    """Notebook 05's training rows (self-distilled answers plus corpus rows), `n_rows` of them."""
    from transformers import AutoTokenizer

    from chapters.ch05_drafter import drafter_lab
    from helpers.common import profiles, prompts
    from helpers.eagle3 import checkpoint, train
    from helpers.engine import lifecycle, runs
    from helpers.tiny import lab

    profile = profiles.load_profile("tiny")
    tok = AutoTokenizer.from_pretrained(profile.verifier_path())
    verifier = checkpoint.load_verifier(profile.verifier_path(), device=device)
    held_out = [p for ps in prompts.load_prompts().values() for p in ps]
    examples = lab.distill_examples(N_DISTILL, SEED, exclude=held_out)
    t0 = time.perf_counter()
    with lifecycle.open_engine(**lifecycle.engine_kwargs(profile, k=0)) as llm:
        distilled = runs.self_distill(llm, [ex.user for ex in examples])
    sampler = train.MixedSampler(
        distilled, drafter_lab.corpus_rows(tok, N_CORPUS, SEED), SEQ_LEN, CORPUS_SHARE, SEED
    )
    rows = sampler.batch(n_rows)
    info = {"distilled_exchanges": len(distilled), "distill_s": round(time.perf_counter() - t0, 1)}
    return profile, verifier, rows, info


def tap_states(verifier: Any, x: torch.Tensor, aux_layers: Sequence[int]) -> torch.Tensor:
    """[B, T, len(aux) + 1, H]: the aux taps, then the last layer's output before the final norm
    (what speculators' `verifier_last_hidden_states` is, `speculators/train/data.py`)."""
    from helpers.eagle3 import taps

    last: list[torch.Tensor] = []
    hook = verifier.model.layers[-1].register_forward_hook(
        lambda _m, _i, out: last.append(out[0] if isinstance(out, tuple) else out)
    )
    try:
        aux, _ = taps.verifier_taps(verifier, x, aux_layers)
    finally:
        hook.remove()
    b, t, _ = aux.shape
    return torch.cat([aux.view(b, t, len(aux_layers), -1), last[0].unsqueeze(2)], 2)


def write_dataset(
    verifier: Any, rows: torch.Tensor, aux_layers: Sequence[int], out: Path, chunk: int = 64
) -> Path:
    """speculators' training data for `rows`: an Arrow dataset (input_ids, loss_mask, seq_len) and
    one `hidden_states/hs_{i}.safetensors` (token_ids, hidden_states [T, 4, H]) per row."""
    from datasets import Dataset
    from datasets.table import InMemoryTable
    from safetensors.torch import save_file

    (out / "hidden_states").mkdir(parents=True, exist_ok=True)
    for start in range(0, len(rows), chunk):
        x = rows[start : start + chunk].to(verifier.device)
        states = tap_states(verifier, x, aux_layers).float().cpu()
        for j in range(len(x)):
            save_file(
                {"token_ids": x[j].cpu().clone(), "hidden_states": states[j].contiguous()},
                str(out / "hidden_states" / f"hs_{start + j}.safetensors"),
            )
    columns = {
        "input_ids": [r.tolist() for r in rows],
        "loss_mask": [[1] * rows.shape[1] for _ in rows],
        "seq_len": [rows.shape[1]] * len(rows),
    }
    # An explicit fingerprint: datasets 5.1.0 otherwise hashes the table with dill, which failed
    # on the GPU image's Python 3.12.3 ("Can't pickle <class 'MonthDayNano'>").
    ds = Dataset(InMemoryTable.from_pydict(columns), fingerprint=f"workbook-rows-{len(rows)}")
    ds.set_format(type="torch")
    ds.save_to_disk(str(out))
    return out


def speculators_command(
    init: Path, data: Path, save: Path, verifier: Path, steps: int
) -> list[str]:
    """`python -m speculators.train` with the workbook loop's settings where speculators has them."""
    return [
        sys.executable, "-m", "speculators.train",
        "--verifier-name-or-path", str(verifier),
        "--from-pretrained", str(init),
        "--data-path", str(data),
        "--total-seq-len", str(BATCH * SEQ_LEN),
        "--train-data-ratio", str(TRAIN_RATIO),
        "--hidden-states-dtype", "float32",
        "--draft-attn-impl", "sdpa",
        "--loss-fn", "kl_div",
        "--ttt-steps", str(TTT_STEPS),
        "--ttt-step-loss-decay", str(DECAY),
        "--optimizer", "adamw",
        "--lr", str(LR),
        "--weight-decay", "0.0",
        "--scheduler-type", "cosine",
        "--scheduler-warmup-steps", str(WARMUP),
        "--epochs", "1",
        "--max-steps", str(steps),
        "--num-workers", "0",
        "--seed", str(SEED),
        "--log-freq", "10",
        "--no-resume-from-checkpoint",
        "--save-path", str(save),
    ]  # fmt: skip


def latest_checkpoint(save: Path) -> Path:
    """The newest folder under `save` that holds a drafter (config.json and model.safetensors)."""
    found = sorted(
        p.parent for p in save.rglob("model.safetensors") if (p.parent / "config.json").is_file()
    )
    if not found:
        raise SystemExit(f"speculators wrote no checkpoint under {save}")
    return max(found, key=lambda p: p.stat().st_mtime)


def measure(
    profile: Any, drafter_dir: Path, label: str, args: argparse.Namespace
) -> dict[str, Any]:
    """vLLM CI's rows (k = 3, T = 0) on the held-out workbook prompts (64 tokens) and on HumanEval
    (256 tokens), each with its interval over prompts, from one engine."""
    from helpers.analytics import benchmark
    from helpers.common import prompts
    from helpers.engine import lifecycle, runs

    sets = {
        "workbook": (prompts.load_prompts(args.eval_prompts), 64),
        "humaneval": (benchmark.dataset_prompts("humaneval", args.humaneval), 256),
    }
    kwargs = lifecycle.engine_kwargs(
        profile, k=3, speculative_config=lifecycle.speculative_config(str(drafter_dir), 3)
    )
    out: dict[str, Any] = {"label": label, "drafter": str(drafter_dir)}
    with lifecycle.open_engine(**kwargs) as llm:
        for name, (ps, tokens) in sets.items():
            table = benchmark.measure(runs.run_categories(llm, ps, runs.sampling(tokens)), 3)
            out[name] = table[table["subset"] == "all"].iloc[0].to_dict()
    return out


def _save(out: Path, record: dict[str, Any]) -> None:
    """Write the record so far (a later failure keeps what was measured)."""
    (out / "record.json").write_text(
        json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8"
    )


def main(argv: list[str] | None = None) -> int:
    """Draw rows, train both ways from one initial drafter, measure all three drafters."""
    args = _parse_args(argv)
    from helpers.eagle3 import checkpoint, train

    if not torch.cuda.is_available():
        print("speculators_side_by_side: speculators' trainer needs a CUDA GPU; none is visible")
        return 2
    out, t0 = args.out, time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    n_train = args.steps * BATCH
    n_rows = math.ceil(n_train / TRAIN_RATIO) + 1
    profile, verifier, rows, info = draw_rows(n_rows, "cuda")
    n_train = int(n_rows * TRAIN_RATIO)  # speculators' split index
    aux = tuple(
        json.loads((Path(profile.drafter_path()) / "config.json").read_text(encoding="utf-8"))[
            "eagle_aux_hidden_state_layer_ids"
        ]
    )
    record: dict[str, Any] = {
        "rows": n_rows,
        "train_rows": n_train,
        "aux_layers": list(aux),
        **info,
    }

    init = train.new_drafter(verifier, aux, SEED)
    cfg = checkpoint.drafter_config(init.shape, list(aux), profile.verifier)
    checkpoint.save_drafter(init, out / "init", cfg)
    spec_init, unmatched = checkpoint.load_in_speculators(out / "init")
    assert not unmatched, f"speculators left {unmatched} unmatched in the initial drafter"
    spec_init.save_pretrained(out / "init-speculators")

    ts = time.perf_counter()
    hist = train.train_drafter(
        init, verifier, ReplaySampler(rows[:n_train]), min(args.steps, n_train // BATCH), aux,
        TTT_STEPS, BATCH, LR,
    )  # fmt: skip
    checkpoint.save_drafter(init, out / "workbook", cfg)
    _save(out, record)
    record["workbook_train"] = {"seconds": round(time.perf_counter() - ts, 1), "steps": len(hist.loss),
                                "loss_first10": sum(hist.loss[:10]) / 10, "loss_last10": sum(hist.loss[-10:]) / 10}  # fmt: skip

    ts = time.perf_counter()
    data = write_dataset(verifier, rows, aux, out / "data")
    record["dataset_s"] = round(time.perf_counter() - ts, 1)
    _save(out, record)
    cmd = speculators_command(out / "init-speculators", data, out / "speculators-run",
                              profile.verifier_path(), args.steps)  # fmt: skip
    ts = time.perf_counter()
    log = out / "speculators-train.log"
    with log.open("w", encoding="utf-8") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False).returncode
    record["speculators_train"] = {"seconds": round(time.perf_counter() - ts, 1), "rc": rc,
                                   "command": " ".join(cmd[1:])}  # fmt: skip
    if rc:
        print(log.read_text(encoding="utf-8")[-3000:])
        _save(out, record)
        return 1
    spec_out = latest_checkpoint(out / "speculators-run")
    drafter_copy = out / "speculators"
    subprocess.run(["rm", "-rf", str(drafter_copy)], check=True)
    subprocess.run(["cp", "-r", str(spec_out), str(drafter_copy)], check=True)
    _, unmatched = checkpoint.load_in_speculators(drafter_copy)
    record["speculators_checkpoint"] = {
        "from": str(spec_out),
        "unmatched_in_speculators": unmatched,
    }
    del verifier
    torch.cuda.empty_cache()

    record["measured"] = []
    for drafter_dir, label in [
        (Path(profile.drafter_path()), "shipped"),
        (out / "workbook", "workbook trainer"),
        (drafter_copy, "speculators trainer"),
    ]:
        try:
            record["measured"].append(measure(profile, drafter_dir, label, args))
        except Exception as err:  # a failed engine is recorded, the others still run
            record["measured"].append({"label": label, "error": f"{type(err).__name__}: {err}"})
        _save(out, record)
    record["wall_s"] = round(time.perf_counter() - t0, 1)
    _save(out, record)
    for m in record["measured"]:
        print(
            m["label"], {k: round(m[k]["acceptance_length"], 3) for k in ("workbook", "humaneval")}
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
