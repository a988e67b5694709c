#!/usr/bin/env bash
# late-usage-error.sh: a usage error found late (after the grader started)
# still leaves a results.json and no work directory.
set -u
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
for bad in "--lab lab9" "--perturb foo"; do
    # shellcheck disable=SC2086  # $bad is two words
    TMPDIR=$t build/grade --solutions --quick $bad --json "$t/r.json" > "$t/out.txt" 2>&1
    [ $? -eq 2 ] && [ -s "$t/r.json" ] && ! ls -d "$t"/grade.* 2>/dev/null || { cat "$t/out.txt"; echo "$bad"; exit 1; }
    echo "$bad: refused, reports written, nothing left behind"
done
