#!/usr/bin/env bash
# grade-unfinished.sh: the unfinished student files fail, saying what is
# missing, and score nothing: a check they pass (a memory bound, a byte
# count) earns no point while their runs' TODOs are unwritten.
set -u
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
build/grade --ref-cache "$REFCACHE" --quick --json "$t/r.json" --junit "$t/r.xml" > "$t/out.txt" 2>&1
rc=$?
tail -n 5 "$t/out.txt"
[ $rc -ne 0 ] && grep -q "not written yet" "$t/out.txt" || { echo "it did not fail saying: not written yet"; exit 1; }
/usr/bin/python3 grader/tests/check_reports.py "$t/r.json" "$t/r.xml" &&
    /usr/bin/python3 -c "import json, sys; s = json.load(open(sys.argv[1]))['score']; print('score', s); sys.exit(s != 0)" "$t/r.json"
