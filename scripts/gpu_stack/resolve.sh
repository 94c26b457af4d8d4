#!/usr/bin/env bash
# resolve.sh: re-resolve the GPU test stack (vLLM 0.31.0 + the workbook's requirements/common.txt)
# for the H200 image's platform and rewrite wheels.txt from it (resolve.py says what stays behind
# and why). Needs PyPI; about 3 minutes. Run from the project root after changing a pin.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/platforms.sh"
vllm=$(grep -E '^vllm==' requirements/gpu.txt)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
grep -vE '^(#|-r|$)' requirements/common.txt > "$tmp/common.txt"
python3 -m pip install --dry-run --ignore-installed --quiet --report "$tmp/report.json" \
  "${PLATFORM_FLAGS[@]}" --target "$tmp/target" "$vllm" -r "$tmp/common.txt" 2>&1 | grep -v "is ignored" || true
grep -vE '^(#|$)' requirements/no-deps.txt > "$tmp/no-deps.txt"
python3 -m pip install --dry-run --ignore-installed --quiet --no-deps --report "$tmp/no-deps.json" \
  "${PLATFORM_FLAGS[@]}" --target "$tmp/target" -r "$tmp/no-deps.txt" 2>&1 | grep -v "is ignored" || true
python3 "$here/resolve.py" "$tmp/report.json" "$tmp/no-deps.json" > "$here/wheels.txt"
echo "wheels.txt: $(grep -vc '^#' "$here/wheels.txt") wheels"
