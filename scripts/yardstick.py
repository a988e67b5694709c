"""yardstick.py: the separation table of the grader's equivalence checks.

    python3 scripts/yardstick.py build/yardstick/*.tsv

Reads the margins build/grade --margins wrote (one line a check: lab, run,
check, pass, ratio = the figure over its bound, what was graded, its EXPECT
line) from each configuration's file (NAME.tsv: the solutions and the legal
variants under one machine's rounding; bugs.tsv: the planted bugs) and prints,
per equivalence check:

- the largest ratio correct code reached over every configuration (where it
  passes, it is below 1), and where;
- the smallest ratio among the planted bugs that this check caught (failed
  with a ratio above 1), and which bug;
- their quotient: how far apart the two lie, the separation.

Then, per configuration, the smallest margin (bound / error) of each check.
Exits 1 when correct code failed any check anywhere.
"""
import collections
import math
import os
import sys

CHECKS = ["loss per step", "first-step gradient", "final parameters", "final optimizer state"]


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 7:
                continue
            lab, run, check, ok, ratio, what, expect = parts
            rows.append({"lab": lab, "run": run, "check": check, "pass": ok == "1",
                         "ratio": None if ratio == "-" else float(ratio), "what": what, "expect": expect})
    return rows


def main(paths):
    legal = []      # (config, row)
    bugs = []
    for path in paths:
        config = os.path.basename(path)[:-4]
        for row in read(path):
            if row["expect"] == "PASS":
                legal.append((config, row))
            elif config == "bugs":
                bugs.append(row)
    failed = [(c, r) for c, r in legal if not r["pass"]]

    print("## Separation: correct code's worst against the planted bugs' least\n")
    print("| check | correct code, largest error / bound | where | planted bugs it caught, smallest error / bound "
          "| which | separation |")
    print("|---|---|---|---|---|---|")
    for check in CHECKS:
        ok = [(c, r) for c, r in legal if r["check"] == check and r["ratio"] is not None]
        caught = [r for r in bugs if r["check"] == check and not r["pass"] and r["ratio"] is not None]
        worst = max(ok, key=lambda cr: cr[1]["ratio"]) if ok else None
        least = min(caught, key=lambda r: r["ratio"]) if caught else None
        wl = f"{worst[1]['ratio']:.3g}" if worst else "-"
        where = f"{worst[1]['lab']} {worst[1]['run']} ({worst[0]})" if worst else "-"
        bl = f"{least['ratio']:.3g}" if least else "-"
        which = f"{least['lab']} {least['what']} ({len(caught)} caught)" if least else "none caught"
        sep = least["ratio"] / worst[1]["ratio"] if worst and least and worst[1]["ratio"] > 0 else math.inf
        print(f"| {check} | {wl} | {where} | {bl} | {which} | {sep:.3g} |" if worst and least
              else f"| {check} | {wl} | {where} | {bl} | {which} | - |")

    print("\n## Correct code: the smallest margin (bound / error) per check and configuration\n")
    configs = sorted({c for c, _ in legal})
    print("| configuration | " + " | ".join(CHECKS) + " | checks | failed |")
    print("|---|" + "---|" * (len(CHECKS) + 2))
    for config in configs:
        rows = [r for c, r in legal if c == config]
        cells = []
        for check in CHECKS:
            rs = [r["ratio"] for r in rows if r["check"] == check and r["ratio"] is not None]
            cells.append(f"{1 / max(rs):.3g}" if rs and max(rs) > 0 else ("inf" if rs else "-"))
        nfail = sum(not r["pass"] for r in rows)
        print(f"| {config} | " + " | ".join(cells) + f" | {len(rows)} | {nfail} |")

    if bugs:
        by_bug = collections.OrderedDict()
        for r in bugs:
            by_bug.setdefault((r["lab"], r["what"]), []).append(r)
        print("\n## Planted bugs: the equivalence checks each one failed\n")
        for (lab, what), rows in by_bug.items():
            fails = sorted({(r["check"], r["ratio"]) for r in rows if not r["pass"] and r["check"] in CHECKS},
                           key=lambda x: -(x[1] or 0))
            text = ", ".join(f"{c} x{x:.3g}" for c, x in fails) or "(caught by other checks)"
            print(f"- {lab} {what}: {text}")

    if failed:
        print("\ncorrect code FAILED:")
        for c, r in failed:
            print(f"  {c}: {r['lab']} {r['run']} {r['check']} ({r['what']}) ratio {r['ratio']}")
        return 1
    print(f"\ncorrect code passed all {len(legal)} checks in {len(configs)} configurations")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
