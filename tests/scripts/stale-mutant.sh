#!/usr/bin/env bash
# stale-mutant.sh: a planted bug that no longer fits its solution fails
# loudly, not silently.
set -u
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
{ echo "MUTANT: a patch whose context has drifted"; echo "EXPECT: anything"
  echo "--- a/lab02_ddp/solution/ddp.c"; echo "+++ b/lab02_ddp/solution/ddp.c"
  echo "@@ -1,2 +1,2 @@"; echo "-// a line the solution does not have"; echo "+// another"; echo " // nor this"; } > "$t/stale.patch"
build/grade --lab lab02 --mutant "$t/stale.patch" --quick
