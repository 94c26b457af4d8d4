#!/usr/bin/env bash
# install.sh: on the GPU machine, once every part is staged: check the checksum, install the
# wheels into /tmp/site and this checkout editable (which registers its vllm.general_plugins entry
# point), then check.py: versions, the GPU, and every requirement of vLLM and the workbook.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
t0=$(date +%s)
cat /tmp/stack/stack.tar.part* > /tmp/stack.tar
(cd /tmp && cp /tmp/stack/stack.sha256 . && sha256sum -c --quiet stack.sha256) \
  || { echo "install.sh: checksum failed: a part is missing (was the machine restarted between parts?); stage every part again"; exit 3; }
rm -rf /tmp/wheels && tar -xf /tmp/stack.tar -C /tmp && rm -f /tmp/stack.tar
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site /tmp/wheels/*.whl
source "$here/env.sh"
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e .
echo "install.sh: installed in $(( $(date +%s) - t0 )) s"
python3 "$here/check.py"
