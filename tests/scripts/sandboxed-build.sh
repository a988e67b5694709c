#!/usr/bin/env bash
# sandboxed-build.sh: as root, a submission is built as untrusted as it
# runs: the trusted tree hidden (an #include of the solution by its path
# finds nothing), limits on time and memory (#include "/dev/zero"), no
# standard input ("/dev/stdin").
set -u
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
chmod 711 "$t"
mkdir "$t/path" "$t/zero" "$t/stdin"
printf '#include "%s/lab02_ddp/solution/ddp.c"\n' "$PWD" > "$t/path/ddp.c"
printf '#include "/dev/zero"\n' > "$t/zero/ddp.c"
printf '#include "/dev/stdin"\n' > "$t/stdin/ddp.c"
for s in path zero stdin; do
    TMPDIR=$t timeout 300 build/grade --submission "$t/$s" --lab lab02 --runs np2-bucketed \
        --json "$t/$s.json" > "$t/$s.out" 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -q "does not compile" "$t/$s.json" || { tail -5 "$t/$s.out"; echo "$s: exit $rc"; exit 1; }
    echo "$s: does not compile, as it should"
done
