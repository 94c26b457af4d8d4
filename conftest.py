"""pytest's root conftest: puts the repository root on sys.path (so `tests.support` imports from
a chapter's own tests, src/chapters/chNN_*/tests/) and gives those tests tests/conftest.py's
fixtures."""

from tests.conftest import (  # noqa: F401 - fixtures, found by name
    _tiny_pair_source,
    added_profile,
    qwen3_built,
    tiny,
    tiny_pair,
    tok,
)
