#!/usr/bin/env bash
# stage.sh: on the GPU machine, keep the part that came with this call (this script's folder) in
# /tmp/stack, where it outlives the call (the carried folder does not).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p /tmp/stack && cp "$here"/stack.tar.part* "$here/stack.sha256" /tmp/stack/
echo "staged $(ls "$here" | grep part); /tmp/stack holds $(ls /tmp/stack | grep -c part) part(s), $(du -sh /tmp/stack | cut -f1)"
