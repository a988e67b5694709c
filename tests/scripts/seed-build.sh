#!/usr/bin/env bash
# seed-build.sh TREE: give TREE (a student release unpacked from this tree)
# this tree's build/ objects, libraries and flags, so that its make compiles
# nothing it need not: the release's files are this tree's files, compiled
# here already. An object whose source the release does not hold is not
# given (the release must build without it, and would fail if it needed
# it); the objects' dependency files name every header they were made
# from, so a header the release lacks still fails its build. The release
# then builds as this tree does (CUDA as this tree was built).
set -eu
tree=$1
mkdir -p "$tree/build"
tar -cf - --exclude='build/obj/*/solution' build/obj $(ls -d build/*.a build/.cflags build/.nvccflags build/config.mk \
    build/.deps-ok build/.deps-check-ok 2>/dev/null) | tar -xpf - -C "$tree"
cd "$tree"
find build/obj -name '*.o' | while read -r o; do
    src=${o#build/obj/}
    src=${src%.o}
    [ -e "$src.c" ] || [ -e "$src" ] || rm -f "$o" "${o%.o}.d"   # (a .cu's object is NAME.cu.o)
done
# The libraries are remade from the objects the release holds.
rm -f build/*.a
