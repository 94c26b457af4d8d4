"""The exercises of notebooks 01-08, each variant run at CI size by calling the same helpers: 02
here, the others in their chapter's tests (src/chapters/chNN_*/tests/test_exercises.py).

Every exercise in notebooks 01-08 is runnable by changing the parameters cell or by the code its
text shows; re-executing whole notebooks per variant would take many minutes, so these tests call
the functions those cells call, with the exercise's arguments, at tiny sizes. One test starts a
vLLM engine (marked `vllm`, about 20 s on 2 CPU cores); the rest run in seconds. Variants not run
here say why in the exercise text:

- 02 ex. 1 K = 5 and 03's k sweep: notebook 03's own nbval run starts an engine per k = 1..5;
- 03 ex. 5 (N_PROMPTS = 8 doubles a 3-minute sweep): the interval's 1/sqrt(2) shrink is checked on
  synthetic requests;
- 04 ex. 1/2/4 (each K needs two server starts and the benchmark; qwen3-30b-a3b needs a GPU and the
  hub): the commands are checked, and the in-process engine runs at K = 1;
- 05 ex. 3 (300 training steps) and τ of every trained variant (one engine start each): the
  variants train for two steps;
- 07 ex. 1, 2, 6 and 7 (an n-gram engine per LOOKUP, 3,000 samples per side, a GPU with Model
  Runner V2, an engine per K) and ex. 5's 200 steps: ex. 3's check on a run without drafts, ex. 4
  and ex. 5's zero steps run here;
- 08 ex. 2 and 3 (TEMPERATURE and N_PER_CATEGORY change what the notebook's engines run) and the
  engines of ex. 1 and 4: the validator of ex. 1 and the schema and sampling of ex. 4 run here.

The graded exercises (03 ex. 6-8, 05 ex. 5: the learner writes the algorithm in exercises/) are
tests/kit/test_grader.py's: it grades the reference solutions with the same checks.
"""

from __future__ import annotations

from tests.support import needs_shipped

# ------------------------------------------------------------------------------------ notebook 02


@needs_shipped
def test_02_ex3_wrong_taps(tiny, tmp_path) -> None:
    """Out of range and repeated ids are refused; valid ids the drafter was not trained on pass."""
    from helpers.common.configs import read_config
    from helpers.eagle3.taps import aux_layers_for
    from helpers.engine.pairing import edited_copy, validate_pair

    verifier_cfg = read_config(tiny.verifier_path())
    taps = aux_layers_for(verifier_cfg, read_config(tiny.drafter_path()))
    L = verifier_cfg["num_hidden_layers"]
    codes = {}
    for ids in ([taps[0], taps[1], L], [taps[0], taps[1], taps[1]], [taps[0], taps[1], L - 1]):
        wrong = edited_copy(
            tiny.drafter_path(), tmp_path / "wrong-taps", eagle_aux_hidden_state_layer_ids=ids
        )
        report = validate_pair(tiny.verifier_path(), wrong)
        codes[ids[-1] if ids[-1] != taps[1] else "repeated"] = (report.ok, report.codes())
    assert codes[L][0] is False and "aux_layers_invalid" in codes[L][1], codes
    assert codes["repeated"][0] is False and "aux_layers_invalid" in codes["repeated"][1], codes
    assert codes[L - 1][0] is True, codes  # loads, would accept little: only τ shows it
