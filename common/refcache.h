// refcache.h: the reference runs, trained once and kept.
//
// Every verdict compares a run with single-device training: the yardstick's
// reference runs (train.h's train_yardstick), each a run of build/ref. They
// depend only on build/ref itself, the flags that decide the training, and
// the machine's rounding (the BLAS kernel, the device), so they are trained
// once and kept on disk, by the lab programs (a run answers at once), the
// grader and the tests alike: one cache, build/refcache by default
// (PL_REFCACHE names another).
//
// An entry is one run's dump, sealed (dump_seal), named by a hash of its key:
// build/ref's own bytes, the flags spelled out (args_reference_flags), the
// yardstick run (micro-batches, rounding), the BLAS kernel, the device and
// the --data file's bytes. It appears whole or not at all (written aside,
// sealed, synced, renamed into place); one that does not read back whole is
// trained again, never trusted. Two processes that need the same entry take
// turns (a lock per entry, taken in the yardstick's order): the second reads
// what the first made. Each build of build/ref has a folder of its own; the
// folders of older builds are removed, the last few kept.
#pragma once

#include <limits.h>
#include <stdbool.h>

#include "args.h"
#include "train.h"

typedef struct {
    char root[PATH_MAX];   // the cache
    char dir[PATH_MAX + 32];   // this build of build/ref's folder in it: root/<hash of build/ref>
    char ref[PATH_MAX];    // build/ref
    bool parallel_ok;      // the fill may run several build/ref at once
} RefCache;

// The reference runs of one training: the yardstick's runs, each an entry.
typedef struct {
    char flags[1024];            // build/ref's flags (args_reference_flags)
    int n;
    YardstickRun runs[YARDSTICK_MAX];
    char paths[YARDSTICK_MAX][PATH_MAX + 64];   // each entry's file
    double flops;                // the work of one run (an estimate, for the time it takes)
} RefSet;

// The cache at `root` (made if missing) for the reference program `ref`.
// False, with a sentence in `why`, when build/ref cannot be read or the
// cache cannot be made.
bool refcache_open(RefCache *rc, const char *root, const char *ref, char *why, size_t len);
// Where a program in folder `bindir` keeps it: $PL_REFCACHE, or bindir/refcache.
void refcache_default_root(const char *bindir, char *out, size_t len);

// The entries of the reference runs that training `a` (the reference's
// Args: the model, the data, the precision) is measured against.
void refcache_set(const RefCache *rc, const Args *a, RefSet *set);
// How many of the set's entries are not whole in the cache now.
int refcache_missing(const RefSet *set);
// Roughly how long the missing entries take to train, `jobs` at a time, in
// seconds (the rate the last fill measured on this machine, or a guess).
double refcache_estimate(const RefCache *rc, const RefSet *set, int jobs);
// How many build/ref may run at once here: the CPUs this process's parent
// may use (a rank under mpirun is bound to one; its children need not be),
// no more than memory allows for runs of this size.
int refcache_jobs(const RefSet *set);

// Train the missing entries, `jobs` build/ref at a time, each within `limit`
// seconds (0: none). `done(k, seconds, ctx)`, when not NULL, is told as each
// run ends. False, with build/ref's last words in `err`, when one failed.
bool refcache_fill(RefCache *rc, RefSet *set, int jobs, double limit, void (*done)(int k, double s, void *ctx),
                   void *ctx, char *err, size_t len);

// Each look-up of a set is counted in the cache's file "lookups", a line
// "FOUND TRAINED FLAGS" each (the tests print the cache's hit rate from it):
// refcache_fill counts its own; a look-up that found every entry and needs
// no fill says so here.
void refcache_count(const RefCache *rc, const RefSet *set, int found, int trained);
