"""Exercise (notebook 03 §4): the greedy accept rule of one draft-and-verify round.

Write the body, then run `make check-exercises`.
"""

from collections.abc import Sequence

from helpers.eagle3 import decode


def accept_greedy(drafts: Sequence[int], targets: Sequence[int]) -> decode.Round:
    """Accept drafts while each equals the verifier's argmax; then emit the verifier's own token.

    drafts: the k drafted token ids; targets: the verifier's argmax at each of the k draft
    positions and after the last one (k + 1 ids). Return decode.Round(drafted, accepted, emitted):
    the drafts as a tuple, how many were accepted, and the emitted tokens (the accepted drafts,
    then one token of the verifier's: a correction at the first mismatch, or the bonus token).
    """
    raise NotImplementedError("write accept_greedy")
