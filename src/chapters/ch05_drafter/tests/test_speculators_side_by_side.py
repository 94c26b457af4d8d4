"""tools/speculators_side_by_side.py on a CPU, up to what needs CUDA: the rows it writes read back
through speculators' own dataset as the drafter's inputs, the speculators command parses and
starts from exactly the workbook's initial weights, and no GPU is a one-line refusal."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from chapters.ch05_drafter.tools import speculators_side_by_side as sbs
from helpers.common.profiles import load_profile
from helpers.eagle3 import checkpoint, taps, train

AUX = (2, 4, 5)


@pytest.fixture(scope="module")
def verifier() -> torch.nn.Module:
    return checkpoint.load_verifier(load_profile("tiny").verifier_path())


def test_rows_read_back_through_speculators_as_the_drafters_inputs(
    verifier, tmp_path: Path
) -> None:
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import ArrowDataset

    rows = torch.randint(0, 2048, (10, 32), generator=torch.Generator().manual_seed(0))
    sbs.write_dataset(verifier, rows, AUX, tmp_path / "data", chunk=4)
    ds = ArrowDataset(32, tmp_path / "data", train_ratio=0.9, hidden_states_dtype=torch.float32)
    assert len(ds) == 9  # speculators keeps the first 90 % for training
    item = shift_batch(ds[3])
    aux, _ = taps.verifier_taps(verifier, rows[3:4], AUX)
    assert torch.equal(item["input_ids"], rows[3, 1:])
    assert torch.allclose(item["hidden_states"], aux[0, :-1], atol=1e-6)
    last = sbs.tap_states(verifier, rows[3:4], AUX)[0, :, -1]
    assert torch.allclose(item["verifier_last_hidden_states"], last[1:], atol=1e-6)
    out = verifier(input_ids=rows[3:4], output_hidden_states=True)
    assert not torch.allclose(last, out.hidden_states[-1][0], atol=1e-3)  # pre-norm, not HF's last


def test_speculators_dry_run_starts_from_the_workbooks_weights(verifier, tmp_path: Path) -> None:
    profile = load_profile("tiny")
    init = train.new_drafter(verifier, AUX, 5)
    cfg = checkpoint.drafter_config(init.shape, list(AUX), profile.verifier)
    checkpoint.save_drafter(init, tmp_path / "init", cfg)
    model, unmatched = checkpoint.load_in_speculators(tmp_path / "init")
    assert unmatched == []
    model.save_pretrained(tmp_path / "init-speculators")
    sbs.write_dataset(verifier, torch.randint(0, 2048, (4, 32)), AUX, tmp_path / "data")
    cmd = sbs.speculators_command(
        tmp_path / "init-speculators",
        tmp_path / "data",
        tmp_path / "run",
        profile.verifier_path(),
        2,
    )
    done = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ours = load_file(str(tmp_path / "init-speculators" / "model.safetensors"))
    theirs = load_file(str(sbs.latest_checkpoint(tmp_path / "run") / "model.safetensors"))
    assert sorted(ours) == sorted(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    embed = verifier.get_input_embeddings().weight
    assert torch.equal(theirs["embed_tokens.weight"], embed)


def test_without_cuda_it_refuses_in_one_line(capsys, tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the script would run")
    assert sbs.main(["--out", str(tmp_path)]) == 2
    assert capsys.readouterr().out.count("\n") == 1
