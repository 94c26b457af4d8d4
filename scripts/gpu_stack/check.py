#!/usr/bin/env python3
"""After install.sh, on the GPU machine: versions, the GPU, and each requirement of the stack.

Prints torch, CUDA, NCCL, vLLM and transformers as imported, then every requirement of vllm,
torch, transformers and the workbook that the environment does not meet, each marked as left
behind on purpose (resolve.py's lists) or not. Exits 1 when torch or vLLM does not import or sees
no GPU, or when a requirement is unmet that resolve.py does not name.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

ROOTS = ("vllm", "torch", "transformers", "eagle3-workbook")


def _unmet() -> list[tuple[str, str, str, str]]:
    """(requirer, requirement, its name, what is installed) for each unmet requirement of ROOTS."""
    from packaging.requirements import Requirement

    out = []
    for root in ROOTS:
        try:
            lines = metadata.requires(root) or []
        except metadata.PackageNotFoundError:
            out.append((root, root, root, "missing"))
            continue
        for line in lines:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                have = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                out.append((root, str(req), req.name, "missing"))
                continue
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                out.append((root, str(req), req.name, have))
    return out


def main() -> int:
    """Print the report; 0 when the stack can run the workbook."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    from resolve import IMAGE_HAS, NOT_IMPORTED

    ok = torch.cuda.is_available()
    print(
        f"torch {torch.__version__} from {Path(torch.__file__).parent}, CUDA {torch.version.cuda}"
    )
    print(f"GPU: {torch.cuda.get_device_name(0) if ok else 'none visible'}")
    print(f"NCCL {'.'.join(map(str, torch.cuda.nccl.version())) if ok else '-'}")
    import transformers
    import vllm

    print(f"vllm {vllm.__version__} | transformers {transformers.__version__}")
    unexpected = 0
    for root, req, name, have in _unmet():
        key = name.lower().replace("_", "-")
        why = next(
            (v for k, v in {**IMAGE_HAS, **NOT_IMPORTED}.items() if k.replace("_", "-") == key),
            None,
        )
        unexpected += why is None
        print(f"  {root} asks {req}: {have} ({why or 'NOT LEFT BEHIND ON PURPOSE'})")
    print(f"check.py: {'ok' if ok and not unexpected else 'PROBLEM'} ({unexpected} unexpected)")
    return 0 if ok and not unexpected else 1


if __name__ == "__main__":
    sys.exit(main())
