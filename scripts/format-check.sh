#!/usr/bin/env bash
# Fails (and lists the files) when any tracked C++ file differs from .clang-format's style.
# `scripts/format-check.sh --fix` rewrites them in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.cpp' '*.hpp' 2>/dev/null)
if [ ${#files[@]} -eq 0 ]; then exit 0; fi
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ ${#bad[@]} -ne 0 ]; then
  echo "format-check: these files differ from .clang-format (run scripts/format-check.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "format-check: ${#files[@]} files formatted"
