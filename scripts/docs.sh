#!/usr/bin/env bash
# Checks (and renders) SIMPClient's DocC catalog, Sources/SIMPClient/SIMPClient.docc, with the
# toolchain's own docc: no swift-docc-plugin. The symbol graph is extracted from the module the
# debug build made, with the compiler flags that build used (from .build/debug.yaml), so run
# `swift build` first. Every link to a symbol or an article must resolve: a warning fails.
# The rendered archive goes to .build/docs/SIMPClient.doccarchive (`docc preview` serves it).
set -euo pipefail
cd "$(dirname "$0")/.."
manifest=.build/debug.yaml
[ -f "$manifest" ] || { echo "docs.sh: no $manifest; run swift build first" >&2; exit 1; }
graphs=$(mktemp -d)
trap 'rm -rf "$graphs"' EXIT
# The search paths, module maps and target of SIMPClient's compile command.
mapfile -t flags < <(python3 - "$manifest" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if '"-module-name","SIMPClient",' in line:
        args = json.loads(line.split("args: ", 1)[1])
        i = 0
        while i < len(args):
            if args[i] in ("-Xcc", "-I", "-target", "-module-cache-path"):
                print(args[i]); print(args[i + 1]); i += 2
            else:
                i += 1
        break
PY
)
[ ${#flags[@]} -gt 0 ] || { echo "docs.sh: SIMPClient's compile command is not in $manifest" >&2; exit 1; }
swift symbolgraph-extract -module-name SIMPClient "${flags[@]}" -minimum-access-level public -output-dir "$graphs"
rm -rf .build/docs/SIMPClient.doccarchive
mkdir -p .build/docs
docc convert Sources/SIMPClient/SIMPClient.docc --additional-symbol-graph-dir "$graphs" \
  --fallback-display-name SIMPClient --fallback-bundle-identifier org.simp.SIMPClient \
  --output-path .build/docs/SIMPClient.doccarchive --analyze --warnings-as-errors
echo "docs.sh: SIMPClient.docc checked; archive in .build/docs/SIMPClient.doccarchive"
