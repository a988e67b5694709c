#!/usr/bin/env bash
# dump-reader.sh: the dump reader refuses a FIFO, /dev/zero and a huge
# sparse file at once, without reading them; dumptool diff is exact without
# --tol.
set -u
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
mkfifo "$t/fifo"
timeout 5 build/dumptool show "$t/fifo" 2>&1 | grep -q "not a regular file" || { echo "a FIFO"; exit 1; }
timeout 5 build/dumptool show /dev/zero 2>&1 | grep -q "not a regular file" || { echo "/dev/zero"; exit 1; }
truncate -s 8G "$t/sparse"
timeout 5 build/dumptool show "$t/sparse" 2>&1 | grep -q "bad magic" || { echo "an 8 GB sparse file"; exit 1; }
{ printf "PLDUMP1\n"; printf "\x04\x00\x00\x00loss\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00"; } > "$t/head"
truncate -s 8G "$t/head"
timeout 5 build/dumptool show "$t/head" 2>&1 | grep -q "truncated\|needs" || { echo "a header with 8 GB of zeros"; exit 1; }
build/ref --steps 2 --layers 1 --dim 32 --heads 2 --seq 16 --device cpu --dump "$t/a.bin" > /dev/null &&
    build/ref --steps 2 --layers 1 --dim 32 --heads 2 --seq 16 --device cpu --seed 7 --dump "$t/b.bin" > /dev/null || exit 1
out=$(build/dumptool diff "$t/a.bin" "$t/b.bin")
[ $? -eq 1 ] && grep -q "tolerance 0 (exact" <<<"$out" && grep -q DIFFER <<<"$out" || { echo "diff is not exact"; exit 1; }
echo "refused at once; diff exact"
