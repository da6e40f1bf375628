#!/usr/bin/env bash
# Lists the functions of engine/, kernels/ and remote/ longer than LIMIT lines
# (default 80), longest first, as "LINES FILE:LINE FUNCTION", measured from the
# function's first line to its closing brace by Universal Ctags. Exits 1 when there
# is one that scripts/long_functions.allow does not name ("FILE FUNCTION  # reason").
#   usage: scripts/long_functions.sh [LIMIT]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
limit=${1:-80}
command -v ctags >/dev/null || { echo "long_functions: SKIP: universal-ctags is missing"; exit 77; }
found=$(find engine kernels remote \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) |
  sort | ctags -L - --language-force=c++ --kinds-c++=f --fields=+ne -o - |
  awk -F'\t' -v limit="$limit" '
    $1 !~ /^__anon/ {
      line = 0; end = 0; scope = ""
      for (i = 4; i <= NF; ++i) {
        if ($i ~ /^line:/) line = substr($i, 6)
        else if ($i ~ /^end:/) end = substr($i, 5)
        else if ($i ~ /^(class|struct|function):/) scope = substr($i, index($i, ":") + 1) "::"
      }
      n = end - line + 1
      if (end > 0 && n > limit) printf "%d %s:%d %s%s\n", n, $2, line, scope, $1
    }' | sort -rn)
allowed=0
bad=0
while read -r n where name; do
  [ -z "${n:-}" ] && continue
  file=${where%%:*}
  if grep -qE "^${file//./\\.} ${name//:/\\:}( |$)" scripts/long_functions.allow 2>/dev/null; then
    echo "$n $where $name (allowed)"
    allowed=$((allowed + 1))
  else
    echo "$n $where $name"
    bad=$((bad + 1))
  fi
done <<<"$found"
echo "long_functions: $bad function(s) over $limit lines, $allowed allowed" >&2
[ "$bad" -eq 0 ]
