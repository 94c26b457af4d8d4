#!/usr/bin/env bash
# pack.sh [DIR] [PART_MIB]: download the GPU test stack (wheels.txt, every file checked against its
# sha256) and cut it into parts that travel one per `device` call. Run from the project root;
# DIR defaults to .gpu (kept out of git through .git/info/exclude), PART_MIB to 38: a call carries
# the working tree too (22 MiB of tracked files on 2026-12-06) and at most 64 MiB in all; 56 MiB
# parts were refused, and 42 MiB ones once the tree had grown to 22 MiB.
# Each DIR/cN holds one part, stage.sh, install.sh, env.sh, check.py and the checksum: send them in
# order, `run(carry=["DIR/cN"], command="bash DIR/cN/stage.sh")`, then `bash DIR/cN/install.sh`
# in the call after the last part (or in the same command as the last stage.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/platforms.sh"
dir=${1:-.gpu}; part_mib=${2:-38}
grep -qxF "/$dir/" .git/info/exclude 2>/dev/null || echo "/$dir/" >> .git/info/exclude
mkdir -p "$dir/wheels"
python3 -m pip download --quiet --no-deps --require-hashes "${PLATFORM_FLAGS[@]}" \
  -d "$dir/wheels" -r "$here/wheels.txt" 2>&1 | grep -v "is ignored" || true
want=$(grep -vc '^#' "$here/wheels.txt"); have=$(ls "$dir/wheels" | wc -l)
[ "$have" -eq "$want" ] || { echo "pack.sh: $have wheels in $dir/wheels, wheels.txt lists $want: remove $dir/wheels and pack again"; exit 3; }
echo "wheels: $have ($(du -sh "$dir/wheels" | cut -f1))"
rm -rf "$dir"/c[0-9]* "$dir/stack.tar"*
tar -cf "$dir/stack.tar" -C "$dir" wheels
(cd "$dir" && sha256sum stack.tar > stack.sha256 && split -b "${part_mib}M" -d -a 2 stack.tar stack.tar.part)
i=0
for p in "$dir"/stack.tar.part*; do
  i=$((i+1)); mkdir -p "$dir/c$i"; mv "$p" "$dir/c$i/"
  cp "$here/stage.sh" "$here/install.sh" "$here/env.sh" "$here/check.py" "$here/resolve.py" "$dir/stack.sha256" "$dir/c$i/"
done
rm -f "$dir/stack.tar"
echo "parts: $i of at most $part_mib MiB in $dir/c1 .. $dir/c$i"
