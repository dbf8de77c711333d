#!/usr/bin/env bash
# Checks that every #include "<module>/..." in src/ points to the module itself or to one below
# it (docs/architecture.md). Prints each violation as file:line and exits 1 if there is one.
# Usage: scripts/check-layers.sh [SRC_DIR]
set -euo pipefail
src=${1:-$(cd "$(dirname "$0")/.." && pwd)/src}

# What each module may include besides itself.
declare -A allowed=(
  [text]=""
  [nvml]=""
  [proc]=""
  [drm]="proc"
  [snapshot]="nvml drm proc"
  [kill]="snapshot nvml drm proc text"
  [doctor]="kill snapshot nvml drm proc text"
  [job]="kill snapshot nvml drm proc text"
  [watch]="kill snapshot nvml drm proc text http"
  [http]="text"
  [fleet]="http text"
  [metrics]="doctor kill snapshot nvml drm proc text"
  [exporter]="metrics http doctor kill snapshot nvml drm proc text"
  [top]="doctor kill snapshot nvml drm proc text"
  [cli]="doctor job kill watch exporter metrics fleet http top snapshot nvml drm proc text"
)

violations=0
checked=0
for dir in "$src"/*/; do
  module=$(basename "$dir")
  if [[ -z ${allowed[$module]+set} ]]; then
    echo "check-layers: $module/ is not a known module: add it to scripts/check-layers.sh and docs/architecture.md" >&2
    violations=$((violations + 1))
    continue
  fi
  while IFS=: read -r file line target; do
    checked=$((checked + 1))
    [[ $target == "$module" ]] && continue
    [[ " ${allowed[$module]} " == *" $target "* ]] && continue
    echo "$file:$line: $module includes $target/, which is not below it" >&2
    violations=$((violations + 1))
  done < <(grep -HnoE '^#include "[a-z_]+/' "$dir"*.{hpp,cpp} 2>/dev/null |
           sed -E 's/#include "([a-z_]+)\//\1/')
done
# main.cpp sits above cli: it may include anything.
if [[ $checked -eq 0 ]]; then
  echo "check-layers: no includes found under $src: wrong directory?" >&2
  exit 1
fi
if [[ $violations -ne 0 ]]; then
  echo "check-layers: $violations include(s) point upward" >&2
  exit 1
fi
echo "check-layers: $checked includes, all pointing to the module itself or below"
