#!/usr/bin/env bash
# Checks that every #include "<module>/..." in src/ points to the module itself or to one below
# it (docs/architecture.md). A module is a top-level folder of src/ with every folder inside it
# (cli/ps/, http/module/). Prints each violation as file:line and exits 1 if there is one.
# Usage: scripts/check-layers.sh [SRC_DIR]
set -euo pipefail
src=${1:-$(cd "$(dirname "$0")/.." && pwd)/src}

# What each module may include besides itself.
declare -A allowed=(
  [text]=""
  [accounts]=""
  [nvml]=""
  [proc]="accounts"
  [spawn]="proc accounts"
  [audit]="proc accounts text"
  [drm]="proc accounts"
  [holders]="proc accounts"
  [snapshot]="nvml drm holders proc accounts"
  [kill]="spawn snapshot audit nvml drm holders proc accounts text"
  [reap]="kill spawn snapshot audit nvml drm holders proc accounts text"
  [doctor]="kill spawn snapshot audit nvml drm holders proc accounts text"
  [job]="kill spawn snapshot audit nvml drm holders proc accounts text"
  [watch]="kill spawn snapshot audit nvml drm holders proc accounts text http"
  [http]="text"
  [fleet]="http text"
  [metrics]="doctor kill spawn snapshot audit nvml drm holders proc accounts text"
  [exporter]="metrics http doctor kill spawn snapshot audit nvml drm holders proc accounts text"
  [top]="doctor kill spawn snapshot audit nvml drm holders proc accounts text"
  [cli]="doctor job kill reap watch exporter metrics fleet http top spawn snapshot audit nvml drm holders proc accounts text"
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
  done < <(grep -rHnoE --include='*.hpp' --include='*.cpp' '^#include "[a-z_]+/' "$dir" |
           sed -E 's/#include "([a-z_]+)\//\1/')
done
# main.cpp sits above cli and includes only cli/command_line.hpp.
if [[ $checked -eq 0 ]]; then
  echo "check-layers: no includes found under $src: wrong directory?" >&2
  exit 1
fi
if [[ $violations -ne 0 ]]; then
  echo "check-layers: $violations include(s) point upward" >&2
  exit 1
fi
echo "check-layers: $checked includes, all pointing to the module itself or below"
