#!/usr/bin/env python3
"""Write wheels.txt, the GPU test stack for the pinned vLLM: what the H200 image lacks, with hashes.

The H200 test image (Python 3.12, torch 2.11.0+cu130 and its CUDA 13 libraries, no network) gets
vLLM 0.31.0, its torch 2.13.0 and the notebook stack. pip resolves the whole set for that platform
(`pip install --dry-run --report`, run by `resolve.sh`); this script keeps what has to travel and
writes each wheel with its sha256, so `pack.sh` downloads exactly these files (`--require-hashes`).
Whatever is left out is named below with the reason it may stay behind. Stdlib only.

A second report, of requirements/no-deps.txt resolved with `--no-deps` (speculators and the
modules it imports), is appended: those wheels travel as they are, as `make venv` installs them.

    python3 scripts/gpu_stack/resolve.py REPORT.json [NO_DEPS_REPORT.json] > scripts/gpu_stack/wheels.txt
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping

#: Left behind because the image already has them, for torch 2.11.0+cu130, at versions torch
#: 2.13.0 loads: the CUDA 13 libraries (torch 2.13.0 asks for cuda-toolkit 13.0.3, the image's is
#: 13.0.2: only cuBLAS moves, 13.1.0.3 -> 13.1.1.3, same soname; cuDNN 9.19 vs 9.20 is checked by
#: torch only where cuDNN runs, and vLLM's text models never run it; cuSPARSELt 0.8.0 exports every
#: symbol 2.13.0 imports; NVSHMEM is 3.4.5 in both) and the compiled packages torch and vLLM only
#: need at some version.
IMAGE_HAS: Mapping[str, str] = {
    "nvidia-cublas": "CUDA library of the image",
    "nvidia-cuda-cccl": "CUDA library of the image",
    "nvidia-cuda-crt": "CUDA library of the image",
    "nvidia-cuda-cupti": "CUDA library of the image",
    "nvidia-cuda-nvcc": "CUDA library of the image",
    "nvidia-cuda-nvdisasm": "CUDA library of the image",
    "nvidia-cuda-nvrtc": "CUDA library of the image",
    "nvidia-cuda-runtime": "CUDA library of the image",
    "nvidia-cudnn-cu13": "CUDA library of the image (9.19.0.56)",
    "nvidia-cufft": "CUDA library of the image",
    "nvidia-cufile": "CUDA library of the image",
    "nvidia-curand": "CUDA library of the image",
    "nvidia-cusolver": "CUDA library of the image",
    "nvidia-cusparse": "CUDA library of the image",
    "nvidia-cusparselt-cu13": "CUDA library of the image (0.8.0)",
    "nvidia-nvjitlink": "CUDA library of the image",
    "nvidia-nvshmem-cu13": "CUDA library of the image (3.4.5, as torch 2.13.0 asks)",
    "nvidia-nvtx": "CUDA library of the image",
    "nvidia-nvvm": "CUDA library of the image",
    "nvidia-ml-py": "in the image",
    "cuda-toolkit": "metapackage; its libraries are the image's",
    "cuda-bindings": "in the image (torch asks >=13.0.3,<14, as 2.11.0 did)",
    "cuda-core": "in the image",
    "cuda-pathfinder": "in the image",
    "cuda-python": "metapackage of cuda-bindings",
    "numpy": "in the image",
    "numba": "in the image (vLLM's n-gram proposer jit-compiles with it)",
    "llvmlite": "in the image, with its numba",
    "pillow": "in the image",
    "opencv-python-headless": "in the image",
    "torchaudio": "in the image at vLLM's pin, 2.11.0",
    "grpcio": "in the image",
    "cryptography": "in the image",
    "cffi": "in the image",
    "pycparser": "in the image",
    "coverage": "in the image",
    "matplotlib": "in the image",
    "contourpy": "in the image, with matplotlib",
    "cycler": "in the image, with matplotlib",
    "fonttools": "in the image, with matplotlib",
    "kiwisolver": "in the image, with matplotlib",
    "pyparsing": "in the image, with matplotlib",
    "pandas": "in the image",
    "python-dateutil": "in the image, with pandas",
    "tzdata": "in the image, with pandas",
    "pluggy": "in the image, with pytest",
    "iniconfig": "in the image, with pytest",
    "setuptools": "in the image (vLLM asks <81 on Python 3.12; pip resolved 84 from 3.11's markers)",
}

#: Left behind because nothing the workbook runs imports them: kernels for other models or other
#: GPUs (imported by the code paths that use them), media decoders, other load formats, JupyterLab's
#: server (the GPU runs execute notebooks with nbclient and nbval, no browser) and the linter.
NOT_IMPORTED: Mapping[str, str] = {
    "tilelang": "DeepSeek sparse-attention kernels",
    "tokenspeed-mla": "MLA kernels (DeepSeek)",
    "tokenspeed-triton": "tokenspeed-mla's Triton",
    "humming-kernels": "quantised GEMM kernels",
    "quack-kernels": "CuTe-DSL kernels (FlashAttention 4, Blackwell)",
    "nvidia-cutlass-dsl": "CuTe DSL (FlashAttention 4, Blackwell)",
    "nvidia-cutlass-dsl-libs-base": "CuTe DSL",
    "nvidia-cutlass-dsl-libs-core": "CuTe DSL",
    "nvidia-cutlass-dsl-libs-cu12": "CuTe DSL",
    "nvidia-cutlass-dsl-libs-cu13": "CuTe DSL",
    "z3-solver": "tilelang's solver",
    "ml_dtypes": "tilelang's dtypes",
    "torch_c_dlpack_ext": "tilelang and quack's DLPack bridge",
    "nccl-extensions": "flashinfer's multi-GPU communication",
    "pynvvideocodec": "video decoding",
    "torchcodec": "video and audio decoding",
    "fastsafetensors": "load_format=fastsafetensors",
    "instanttensor": "load_format=instanttensor",
    "ruff": "the linter: make test lints on the CPU",
    "jupyterlab": "JupyterLab (make lab); GPU runs use nbclient and nbval",
    "jupyter_server": "JupyterLab's server",
    "jupyter-lsp": "JupyterLab's server",
    "jupyterlab_server": "JupyterLab's server",
    "jupyter_server_terminals": "JupyterLab's server",
    "jupyter-events": "JupyterLab's server",
    "jupyter_builder": "JupyterLab's server",
    "notebook_shim": "JupyterLab's server",
    "terminado": "JupyterLab's server",
    "send2trash": "JupyterLab's server",
    "argon2-cffi": "JupyterLab's server",
    "argon2-cffi-bindings": "JupyterLab's server",
    "overrides": "JupyterLab's server",
    "async-lru": "JupyterLab's server",
    "babel": "JupyterLab's server",
    "json5": "JupyterLab's server",
    "arrow": "JupyterLab's server",
    "isoduration": "JupyterLab's server",
    "fqdn": "JupyterLab's server",
    "jsonpointer": "JupyterLab's server",
    "uri-template": "JupyterLab's server",
    "webcolors": "JupyterLab's server",
    "rfc3339-validator": "JupyterLab's server",
    "rfc3986-validator": "JupyterLab's server",
    "rfc3987-syntax": "JupyterLab's server",
    "websocket-client": "JupyterLab's server",
}


def _kept(report: Mapping) -> list[tuple[str, str, str]]:
    """(name, version, sha256) of every resolved wheel that has to travel, sorted by name."""
    out = []
    for item in report["install"]:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if name.lower() in IMAGE_HAS or name.lower() in NOT_IMPORTED:
            continue
        sha = item["download_info"]["archive_info"]["hashes"]["sha256"]
        out.append((name.lower(), version, sha))
    return sorted(out)


def main(argv: list[str]) -> int:
    """Print wheels.txt for the pip report named in argv[1] (and the no-deps one in argv[2])."""
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    report = json.loads(open(argv[1]).read())
    if len(argv) == 3:
        names = {i["metadata"]["name"].lower() for i in report["install"]}
        extra = json.loads(open(argv[2]).read())["install"]
        report["install"] += [i for i in extra if i["metadata"]["name"].lower() not in names]
    resolved = {i["metadata"]["name"].lower() for i in report["install"]}
    stale = sorted((set(IMAGE_HAS) | set(NOT_IMPORTED)) - resolved)
    if stale:
        print(f"resolve.py: not in the resolution any more: {', '.join(stale)}", file=sys.stderr)
    print("# The GPU test stack for vLLM 0.31.0 on the H200 image: written by resolve.py from")
    print(
        "# resolve.sh's pip resolution; pack.sh downloads exactly these files (--require-hashes)."
    )
    for name, version, sha in _kept(report):
        print(f"{name}=={version} --hash=sha256:{sha}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
