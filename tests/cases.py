"""cases.py: every test of the course, one line (or a few) each.

A case is a name, a command, a time limit in seconds, what it must do, and
its group (unit, labs, grader, release: make test-unit, ... ; make test runs
all four). What it must do:

  Pass()            exit 0. Exit 77 is a skip (a missing optional tool),
                    shown and not counted as a pass; in CI, where .ci/run
                    installs everything, it is a failure (gpu=True: always
                    a skip, CI's machines have no GPU).
  Fail(PATTERN)     exit non-zero, not by the time limit, saying PATTERN: an
                    unfinished student file, a planted bug.
  Refused(PATTERN)  a usage error: exit 2 within 15 s (no rank left
                    waiting), PATTERN said exactly once. only=True: and
                    nothing else said (under mpirun -q, which leaves out
                    Open MPI's banners: one line, no banner).
  needs=...         a case that cannot run here is skipped, saying why.

A command is a list of words, or one string for bash. Cases run two at a
time (most spend much of their time waiting: mpirun starting, a sandbox, a
watchdog running out); alone=True: a case that times itself runs with
nothing beside it. Longer scripts live in tests/scripts/. Adding a test is
adding a line here.
"""
import os
import re
import shutil
import subprocess

# The order make test runs them in: the release's long build starts the
# last batch of cases that run two at a time, beside the grader's.
GROUPS = ("unit", "labs", "release", "grader")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The reference runs are trained once and kept (common/refcache.h): one
# cache for the lab programs, the grader and every case, the tree's
# build/refcache (entries appear whole, two cases needing one take turns).
ENV = {
    "PL_REFCACHE": os.path.join(ROOT, "build", "refcache"),
    # The programs compute on one thread a rank: OpenBLAS told so before it
    # starts its pool (its idle threads spin a while otherwise).
    "OPENBLAS_NUM_THREADS": "1",
    # mpirun refuses root unless told.
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
}
# More ranks than cores: mpirun must be told.
MPIRUN = ["mpirun", "--oversubscribe"]
GRADE = ["build/grade"]
MUTANTS = ["--quick", "--watchdog", "5", "--limit", "120"]


def mpi(np, *argv):
    return MPIRUN + ["-np", str(np)] + [str(a) for a in argv]


def mpi_q(np, *argv):
    """mpirun -q: without Open MPI's banners, which follow every non-zero
    exit under plain mpirun (README.md, "Three things to know")."""
    return ["mpirun", "-q", "--oversubscribe", "-np", str(np)] + [str(a) for a in argv]


# ---- what a case must do ----------------------------------------------------

def past_limit(rc):
    return rc in (124, 137)


class Pass:
    tail = 0   # lines of a passing case's output shown (0: all)

    def __init__(self, gpu=False):
        self.gpu = gpu

    def describe(self):
        return ""

    def judge(self, rc, out, limit):
        if past_limit(rc):
            return f"ran past its limit of {limit} s"
        if rc == 77 and (self.gpu or os.environ.get("CI") != "true"):
            return "skipped"
        return "ok" if rc == 0 else f"exit code {rc}"


class Fail:
    tail = 25

    def __init__(self, pattern):
        self.pattern = pattern

    def describe(self):
        return f" (must fail, saying: {self.pattern})"

    def judge(self, rc, out, limit):
        if past_limit(rc):
            return f"ran past its limit of {limit} s"
        if rc == 0:
            return "it passed"
        return "ok" if self.pattern in out else f"exited {rc} without saying '{self.pattern}'"


class Refused:
    tail = 4

    def __init__(self, pattern, only=False):
        self.pattern = pattern
        self.only = only

    def describe(self):
        return f" (must be refused, saying once{' and nothing else' if self.only else ''}: {self.pattern})"

    def judge(self, rc, out, limit):
        n = out.count(self.pattern)
        lines = [line for line in out.splitlines() if line.strip()]
        if rc == 2 and n == 1 and self.only and len(lines) != 1:
            return f"said {len(lines)} lines (one wanted: the refusal, no banner)"
        if rc == 2 and n == 1:
            return "ok"
        if past_limit(rc):
            return "a rank was left waiting past 15 s"
        return f"exited {rc} (2 wanted) and said '{self.pattern}' {n} times (once wanted)"


class Case:
    def __init__(self, group, name, cmd, limit, expect=None, alone=False, needs=None):
        self.group, self.name, self.cmd, self.limit = group, name, cmd, limit
        self.expect = expect or Pass()
        self.alone = alone
        self.needs = needs or []

    def argv(self):
        return ["bash", "-c", self.cmd] if isinstance(self.cmd, str) else list(self.cmd)

    def skip_reason(self):
        for need in self.needs:
            why = need()
            if why:
                return why
        return None


# ---- what a case needs --------------------------------------------------------

def have(binary):
    return lambda: None if os.access(os.path.join(ROOT, "build", binary), os.X_OK) else \
        f"build/{binary} is not in this tree"


def solutions():
    return None if os.path.isdir(os.path.join(ROOT, "lab01_collectives", "solution")) else \
        "a student release: no solutions or mutants here"


def root():
    return None if os.geteuid() == 0 else "not root"


def cpu_kernel(name):
    def need():
        if os.uname().machine != "x86_64":
            return f"OPENBLAS_CORETYPE={name} needs an x86-64 CPU"
        if name == "Haswell":
            with open("/proc/cpuinfo") as f:
                if not re.search(r"^flags.*\bavx2\b", f.read(), re.M):
                    return "this CPU cannot run the Haswell kernel (no AVX2)"
        return None
    return need


def nodes():
    p = subprocess.run(["scripts/multinode.sh", "can"], cwd=ROOT, capture_output=True, text=True)
    return None if p.returncode == 0 else f"several nodes cannot be made here ({p.stdout.strip()})"


def cached(need):
    memo = []
    def once():
        if not memo:
            memo.append(need())
        return memo[0]
    return once


nodes = cached(nodes)


# ---- the cases ------------------------------------------------------------------

def unit():
    # Alone, since they time their own waits: communication at world sizes 1
    # to 4 (odd ones too), and the watchdog on a planted deadlock and a
    # frozen rank.
    cs = [Case("unit", f"test_comm np={np}", mpi(np, "build/tests/test_comm"), 300, alone=True) for np in (1, 2, 3, 4)]
    cs += [Case("unit", "test_watchdog", ["build/tests/test_watchdog"], 180, alone=True)]
    cs += [Case("unit", f"test_{t}", [f"build/tests/test_{t}"], 120)
           for t in ("rng", "mem", "data", "dump", "args", "ops", "gpt", "grader")]
    cs += [
        # The reference trainer as a user runs it, and the independent oracle:
        # the same GPT in PyTorch against build/ref.
        Case("unit", "test_ref", ["build/tests/test_ref"], 300),
        Case("unit", "test_plan: the planner against published counts and the Llama 3 405B layouts", ["build/tests/test_plan"], 60),
        Case("unit", "the planner's memory and bytes per rank are labs 03 to 07's measured (tests/scripts/plan_labs.py)",
             ["/usr/bin/python3", "tests/scripts/plan_labs.py"], 180, needs=[solutions]),
        Case("unit", "torch_oracle", ["/usr/bin/python3", "tests/torch_oracle.py"], 300),
        # The same in bf16: build/ref --precision bf16 against the GPT rounded where docs/model.md says.
        Case("unit", "torch_oracle bf16", ["/usr/bin/python3", "tests/torch_oracle_bf16.py"], 300),
        # ops.h's bf16 conversion and products against PyTorch's.
        Case("unit", "bf16 against PyTorch (tests/torch_bf16.py)", ["/usr/bin/python3", "tests/torch_bf16.py"], 120),
        # bf16 trains as fp32 does; without its fp32 master weights it does not.
        Case("unit", "build/ref in bf16 trains, and without master weights stagnates (tests/scripts/bf16_trains.py)",
             ["/usr/bin/python3", "tests/scripts/bf16_trains.py"], 120),
        # --master is bf16's: refused in fp32.
        Case("unit", "build/ref --master without --precision bf16 is refused", ["build/ref", "--master", "off"], 15,
             Refused("--master is about bf16's fp32 master weights; add --precision bf16")),
        # --grad-reduce is bf16's gradients' type: refused in fp32, and by labs that keep no whole gradient.
        Case("unit", "build/ref --grad-reduce without --precision bf16 is refused", ["build/ref", "--grad-reduce", "fp32"],
             15, Refused("--grad-reduce is the type of bf16 training's gradients")),
        Case("unit", "lab03 refuses --grad-reduce", ["build/lab03", "--precision", "bf16", "--grad-reduce", "fp32"],
             15, Refused("--grad-reduce is not a flag of this program")),
    ]
    cs += [Case("unit", f"test_report np={np}", mpi(np, "build/tests/test_report"), 120) for np in (1, 3)]
    cs += [
        Case("unit", "test_trace np=3", mpi(3, "build/tests/test_trace"), 120),
        Case("unit", "the include graphs of common/ and grader/ have no cycle (scripts/include-graph.py)",
             "python3 scripts/include-graph.py grader && python3 scripts/include-graph.py common", 30),
        # The GPU path: every op on the GPU against the CPU's (make gpu-check
        # runs the rest of it: the labs graded on a GPU, NCCL,
        # compute-sanitizer). A wait on NCCL leaves no "not ready" for the
        # next launch's check: a model of the runtime's two functions.
        Case("unit", "test_cuda_poll", ["build/tests/test_cuda_poll"], 60, needs=[have("gpu_check")]),
        Case("unit", "every op: GPU against CPU (build/gpu_check)", ["build/gpu_check"], 300,
             Pass(gpu=True), needs=[have("gpu_check")]),
        Case("unit", "comm.h on GPU buffers (build/tests/test_comm_gpu np=1)", mpi(1, "build/tests/test_comm_gpu"),
             120, Pass(gpu=True), needs=[have("gpu_check")]),
        # The dump reader: a FIFO, /dev/zero and a huge sparse file refused at
        # once; 200,000 records read and compared in seconds (n log n).
        # The reference runs trained once and kept: cold, warm, damaged
        # entries, two runs at once, another kernel, shared by the grader
        # and the labs; an unfinished file answers before its first step.
        Case("unit", "the reference cache: trained once, kept whole, shared (tests/scripts/refcache.sh)",
             ["tests/scripts/refcache.sh"], 240, needs=[solutions]),
        Case("unit", "dump reader refuses what is not a dump, at once", ["tests/scripts/dump-reader.sh"], 60),
        Case("unit", "a dump of 200,000 records is read and compared in seconds",
             ["tests/scripts/many-records.sh"], 60),
    ]
    return cs


BAD = f"build/bad-input.{os.getpid()}"   # made by prepare()


def prepare():
    """What the cases read: the bad inputs (an empty file, a 1-byte file, a
    FIFO; the directory itself is the fourth)."""
    d = os.path.join(ROOT, BAD)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    open(os.path.join(d, "empty"), "w").close()
    with open(os.path.join(d, "one-byte"), "w") as f:
        f.write("x")
    os.mkfifo(os.path.join(d, "fifo"))


def clean_up():
    d = os.path.join(ROOT, BAD)
    left = sorted(set(os.listdir(d)) - {"empty", "one-byte", "fifo"}) if os.path.isdir(d) else []
    if left:
        print(f"(files left behind in {BAD}: {', '.join(left)})")
    shutil.rmtree(d, ignore_errors=True)


def labs():
    def refused(name, pattern, argv, needs, only=False):
        return Case("labs", name, argv, 15, Refused(pattern, only), needs=needs)

    cs = []
    # Bad input is refused before the work, and one rank's refusal ends
    # every rank. (A release of some labs has only theirs.)
    for lab in ("lab02", "lab03", "lab04", "lab05", "lab06", "lab07"):
        b, n = f"build/{lab}", [have(lab)]
        cs += [
            refused(f"{b} --data missing np=2", "cannot open --data file", mpi(2, b, "--data", "/missing/file"), n),
            refused(f"{b} --data empty np=2", "has 0 bytes", mpi(2, b, "--data", f"{BAD}/empty"), n),
            refused(f"{b} --data 1 byte np=2", "has 1 bytes", mpi(2, b, "--data", f"{BAD}/one-byte"), n),
            refused(f"{b} --data directory np=2", "is a directory", mpi(2, b, "--data", BAD), n),
            refused(f"{b} --data FIFO np=2 (no hang)", "is not a regular file", mpi(2, b, "--data", f"{BAD}/fifo"), n),
            refused(f"{b} --dump in a missing directory np=2", "cannot create --dump file",
                    mpi(2, b, "--dump", "/missing/run.bin"), n),
            refused(f"{b} --vocab 3 np=2", "too small for the synthetic data", mpi(2, b, "--vocab", 3), n),
            refused(f"{b} --layers 4096 np=2 (memory)", "but this machine has",
                    mpi(2, b, "--layers", 4096, "--device", "cpu"), n),
        ]
    l3, l2, l4, l5, l6, l1 = ([have(x)] for x in ("lab03", "lab02", "lab04", "lab05", "lab06", "lab01"))
    cs += [
        refused("lab03 --figure in a missing directory np=2", "cannot create --figure file",
                mpi(2, "build/lab03", "--figure", "/missing/m.svg"), l3),
        refused("lab02 --accum not dividing the rows np=2 (after MPI starts)", "which --accum 3 does not divide",
                mpi(2, "build/lab02", "--accum", 3), l2),
        refused("lab04 np=3 with 4 heads (after MPI starts)", "3 ranks cannot split 4 heads", mpi(3, "build/lab04"), l4),
        refused("lab04 --tp 3 np=4", "--tp 3 does not divide 4 ranks", mpi(4, "build/lab04", "--tp", 3), l4),
        refused("lab04 --vocab 255 np=2", "cannot split 255 tokens", mpi(2, "build/lab04", "--vocab", 255), l4),
        refused("lab04 --recompute selective np=2", "--recompute selective is not this lab's",
                mpi(2, "build/lab04", "--recompute", "selective"), l4),
        refused("lab05 --micro 3 np=2", "--micro 3 does not divide", mpi(2, "build/lab05", "--micro", 3), l5),
        refused("lab05 --pp 3 np=4", "--pp 3 does not divide 4 ranks", mpi(4, "build/lab05", "--pp", 3), l5),
        refused("lab05 np=7 stages for 6 units", "7 stages for 6 units", mpi(7, "build/lab05"), l5),
        refused("lab05 --figure in a missing directory np=2", "cannot create --figure file",
                mpi(2, "build/lab05", "--figure", "/missing/s.svg"), l5),
        refused("lab05 --schedule zb-h2 with too few micro-batches np=3", "needs at least 2p - 1 = 5 micro-batches",
                mpi(3, "build/lab05", "--schedule", "zb-h2", "--micro", 4), l5),
        refused("lab05 --schedule zb-h1 --recompute full np=2", "--recompute full cannot split it",
                mpi(2, "build/lab05", "--schedule", "zb-h1", "--recompute", "full"), l5),
        # The interleaved schedule: m a multiple of p (with a value that
        # works), p v virtual stages of a unit each (with a --layers that
        # works), 3 stages or more (p = 2's links would carry both kinds),
        # and --virtual its own (the zero-bubble schedules' neither).
        refused("lab05 interleaved --micro 4 np=3", "use --micro 3",
                mpi(3, "build/lab05", "--schedule", "interleaved", "--micro", 4, "--batch", 12), l5),
        refused("lab05 interleaved np=4 v=2 over 6 units", "use --layers 6",
                mpi(4, "build/lab05", "--schedule", "interleaved"), l5),
        refused("lab05 interleaved np=2", "needs 3 stages or more", mpi(2, "build/lab05", "--schedule", "interleaved"),
                l5),
        refused("lab05 --virtual with 1f1b np=2", "--virtual 2 is the interleaved schedule's",
                mpi(2, "build/lab05", "--virtual", 2), l5),
        refused("lab05 --virtual with zb-h1 np=2", "the zero-bubble schedules split each stage's backward pass",
                mpi(2, "build/lab05", "--schedule", "zb-h1", "--virtual", 2), l5),
        refused("lab05 --virtual with zb-h2 np=3", "--virtual 2 is the interleaved schedule's",
                mpi(3, "build/lab05", "--schedule", "zb-h2", "--micro", 5, "--batch", 10, "--virtual", 2), l5),
        refused("ppfigure of a dump not lab05's (build/ref's)", "is not a dump of lab05 (its program: ref)",
                "build/ref --steps 1 --layers 1 --dump build/ppfigure-ref.dump > /dev/null"
                " && build/ppfigure -o build/ppfigure-ref.svg build/ppfigure-ref.dump", [have("ppfigure")]),
        refused("lab06 np=3 with 64 tokens a row", "3 ranks cannot split 64 tokens",
                mpi(3, "build/lab06", "--heads", 6, "--dim", 96, "--vocab", 192), l6),
        refused("lab06 --tp 3 np=4", "--tp 3 does not divide 4 ranks", mpi(4, "build/lab06", "--tp", 3), l6),
        refused("lab06 --sp off --recompute full", "--recompute full is the student's, on top of sequence parallelism",
                mpi(2, "build/lab06", "--sp", "off", "--recompute", "full"), l6),
        refused("lab01 --data (a flag it does not take)", "--data is not a flag of this program",
                ["build/lab01", "--data", "README.md"], l1),
        refused("grade --json into a missing directory, before any grading", "cannot create --json file",
                ["build/grade", "--solutions", "--json", "/missing/r.json"], []),
        refused("hello --data (a flag it does not take)", "--data is not a flag of this program",
                ["build/hello", "--data", "/missing"], []),
    ]
    # What the grader's runs do not show: each lab program's own verdict
    # with its reference, its default shape, its trace and figure files,
    # lab01's bench; and the unfinished student files, which say what is
    # missing (without the reference, which they would train first: the
    # student release runs them with it, as the READMEs show).
    s = [solutions]
    svg = "/usr/bin/python3 tests/scripts/svg_count.py"
    cs += [
        Case("labs", "lab01_solution --bench np=2 (small sizes)",
             mpi(2, "build/lab01_solution", "--quiet", "--bench", "--min-kib", 1, "--max-mib", 1, "--iters", 3,
                 "--warmup", 1), 300, needs=s),
        Case("labs", "lab01 student np=1", mpi(1, "build/lab01", "--quiet"), 300, Fail("not written yet"), needs=s),
        Case("labs", "lab01 student np=3", mpi(3, "build/lab01", "--quiet"), 300, Fail("not written yet"), needs=s),
        Case("labs", "lab02_solution np=2 flat --accum 2",
             mpi(2, "build/lab02_solution", "--steps", 4, "--strategy", "flat", "--accum", 2), 300, needs=s),
        Case("labs", "lab02_solution np=4 bucketed --trace",
             " ".join(mpi(4, "build/lab02_solution", "--steps", 3, "--strategy", "bucketed", "--bucket-kb", 256,
                          "--trace", "build/lab02.trace.json"))
             + " && /usr/bin/python3 tests/scripts/trace_pids.py build/lab02.trace.json 4", 300, needs=s),
        Case("labs", "lab02 student np=2", mpi(2, "build/lab02", "--steps", 2, "--no-ref"), 300, Fail("not written yet"), needs=s),
        # lab03's student file, as given, is plain data parallelism: right,
        # but it fails the stages' TODOs.
        Case("labs", "lab03_solution np=4 stage 3 --figure",
             " ".join(mpi(4, "build/lab03_solution", "--steps", 3, "--stage", 3, "--figure", "build/lab03-memory.svg"))
             + f" && {svg} build/lab03-memory.svg --rects-at-least 12", 300, needs=s),
        Case("labs", "lab03 student np=2 stage 3", mpi(2, "build/lab03", "--steps", 2, "--stage", 3, "--no-ref"), 300,
             Fail("not written yet"), needs=s),
        # lab04 on the default shape at t = 4 (the grader's runs cover t = 1,
        # 2, 3, the grid, dropout and the naive MLP); its figure: both MLPs'
        # bytes and memory per t.
        Case("labs", "lab04_solution np=4", mpi(4, "build/lab04_solution", "--steps", 3), 300, needs=s),
        # bf16 where the head's logits are the widest operand (V > 4C): the
        # widening scratch sized for them too.
        Case("labs", "lab04_solution np=2 --dim 32 --vocab 256 --precision bf16",
             mpi(2, "build/lab04_solution", "--steps", 3, "--dim", 32, "--vocab", 256, "--precision", "bf16"), 300,
             needs=s),
        Case("labs", "lab04 student np=2", mpi(2, "build/lab04", "--steps", 2, "--no-ref"), 300, Fail("not written yet"), needs=s),
        Case("labs", "lab04_solution np=2 --figure",
             " ".join(mpi(2, "build/lab04_solution", "--steps", 2, "--layers", 2, "--no-ref", "--figure",
                          "build/lab04-tp.svg"))
             + f" && {svg} build/lab04-tp.svg --rects-at-least 18 --circles 2", 300, needs=s),
        # lab04 --recompute full trains as without, to the bit (bf16, dropout:
        # the masks drawn again): the losses, first gradients, parameters
        # and moments of the two dumps identical.
        Case("labs", "lab04_solution np=2 --recompute full: the same training to the bit",
             " && ".join(" ".join(mpi(2, "build/lab04_solution", "--steps", 3, "--layers", 2, "--dropout", 0.1,
                                      "--precision", "bf16", "--no-ref", "--dump", f"build/lab04-rc-{m}.bin", *f))
                         for m, f in (("none", ()), ("full", ("--recompute", "full"))))
             + " && for p in loss grad/ param/ optim/; do build/dumptool diff build/lab04-rc-full.bin "
               "build/lab04-rc-none.bin --prefix $p > /dev/null || exit 1; done", 120, needs=s),
        # lab05: 1F1B on the default shape at p = 4 draws its schedule (the
        # grader's runs cover p = 1 to 4, m = 1 to 8, GPipe and the grid).
        Case("labs", "lab05_solution np=4 1f1b --figure",
             " ".join(mpi(4, "build/lab05_solution", "--steps", 3, "--schedule", "1f1b", "--micro", 8, "--figure",
                          "build/lab05-schedule.svg"))
             + f" && {svg} build/lab05-schedule.svg --rects-at-least 128", 300, needs=s),
        # ZB-H2 at p = 4, m = 8 draws every W as its own pass: m on each of
        # the p stages, in both panels (equal and measured durations).
        Case("labs", "lab05_solution np=4 zb-h2 --figure: every W drawn",
             " ".join(mpi(4, "build/lab05_solution", "--steps", 2, "--schedule", "zb-h2", "--micro", 8, "--figure",
                          "build/lab05-zb-h2.svg"))
             + f" && {svg} build/lab05-zb-h2.svg --rects-at-least 192"
             + " && test $(grep -o '<title>weight gradient' build/lab05-zb-h2.svg | wc -l) -eq 64", 300, needs=s),
        # build/ppfigure: the five schedules at p = 3, m = 6 on one time axis,
        # a panel and a strip of micro-batches alive each (3 rows of grey
        # apiece), titled with their bubbles; the longest step (GPipe's and
        # 1F1B's, 24) spans the axis, interleaved's 21 and the zero-bubble
        # ones' 20 end before it (860 pixels times 21/24 and 20/24).
        Case("labs", "ppfigure: lab05's five schedules np=3 on one time axis",
             "for s in gpipe 1f1b 'interleaved --virtual 2' zb-h1 zb-h2; do n=${s%% *}; "
             + " ".join(mpi(3, "build/lab05_solution", "--schedule", "$s", "--micro", 6, "--batch", 6, "--steps", 1,
                            "--no-ref", "--dump", "build/ppfigure-$n.dump"))
             + " > build/ppfigure-$n.log 2>&1 || { tail -n 20 build/ppfigure-$n.log; exit 1; }; done"
             " && build/ppfigure -o build/ppfigure.svg build/ppfigure-{gpipe,1f1b,interleaved,zb-h1,zb-h2}.dump"
             f" && {svg} build/ppfigure.svg --rects-at-least 282"
             " && test $(grep -c 'font-size=\"13\"' build/ppfigure.svg) -eq 10"
             " && for t in 'GPipe, p = 3, m = 6, v = 1: bubble 25.0% replayed, formula (p - 1)/(m + p - 1) = 25.0%'"
             " '1F1B, p = 3, m = 6, v = 1: bubble 25.0% replayed, formula (p - 1)/(m + p - 1) = 25.0%'"
             " 'interleaved 1F1B, p = 3, m = 6, v = 2: bubble 14.3% replayed, formula (p - 1)/(v m + p - 1) = 14.3%'"
             " 'ZB-H1, p = 3, m = 6, v = 1: bubble 10.0% replayed, formula (p - 1)/(3m + p - 1) = 10.0%'"
             " 'ZB-H2, p = 3, m = 6, v = 1: bubble 10.0% replayed, formula (p - 1)/(3m + p - 1) = 10.0%'"
             " 'ZB-H2: micro-batches alive on each stage, the most 5'; do"
             " grep -q -F \">$t<\" build/ppfigure.svg || { echo \"no panel titled: $t\"; exit 1; }; done"
             " && for w in '860 12' '752.5 6' '716.667 12'; do set -- $w;"
             " test $(grep -c \"width=\\\"$1\\\" height=\\\"28\\\" fill=\\\"#eeeeee\\\"\" build/ppfigure.svg) -eq $2"
             " || { echo \"not $2 rows of grey $1 wide\"; exit 1; }; done", 120,
             needs=s + [have("ppfigure")]),
        Case("labs", "lab05 student np=4 1f1b", mpi(4, "build/lab05", "--steps", 2, "--schedule", "1f1b", "--no-ref"), 300,
             Fail("not written yet"), needs=s),
        # lab06 at t = 4, dropout on (the grader's runs cover t = 1 to 4, the
        # grid and --sp off); its figure: the activations per layer.
        Case("labs", "lab06_solution np=4", mpi(4, "build/lab06_solution", "--steps", 3), 300, needs=s),
        Case("labs", "lab06 student np=2", mpi(2, "build/lab06", "--steps", 2, "--no-ref"), 300, Fail("not written yet"), needs=s),
        Case("labs", "lab06_solution np=2 --figure",
             " ".join(mpi(2, "build/lab06_solution", "--steps", 2, "--layers", 2, "--no-ref", "--figure",
                          "build/lab06-acts.svg"))
             + f" && {svg} build/lab06-acts.svg --rects-at-least 8", 300, needs=s),
        # Full recomputation: the student's TODO 6 says so under --recompute
        # full; the figure of memory against time, the three modes measured
        # (a dot each, the paper's square beside it).
        Case("labs", "lab06 student np=2 --recompute full",
             mpi(2, "build/lab06", "--steps", 1, "--layers", 2, "--no-ref", "--recompute", "full"), 300,
             Fail("sp_block_backward under --recompute full (TODO 6): not written yet"), needs=s),
        # lab07: the unfinished grid says what is missing; a grid that does
        # not divide the ranks is refused before MPI's work.
        Case("labs", "lab07 student np=4 --tp 2 --pp 2", mpi(4, "build/lab07", "--tp", 2, "--pp", 2, "--no-ref"), 300,
             Fail("not written yet"), needs=[have("lab07")]),
        refused("lab07 --tp 3 np=4", "does not divide 4 ranks", mpi(4, "build/lab07", "--tp", 3), [have("lab07")]),
    ]
    # lab07's own: each refused before any work (the student's file as
    # given: no TODO is reached), in one line and no banner (mpirun -q).
    l7 = [have("lab07")]
    for name, pattern, np, argv in (
            ("--gpus past its bound", "--gpus 65536 is out of range: use 0 to 4096", 1,
             ["--budget-mb", 8, "--gpus", 65536]),
            ("--gpus no grid of the model uses", "no grid of 4096 GPUs runs this model", 1,
             ["--budget-mb", 8, "--gpus", 4096]),
            ("--budget-mb below anything", "the smallest (t 2, p 1, dp 1, m 8, recompute full) needs", 2,
             ["--budget-mb", 0.001]),
            ("--gpus without --budget-mb", "--gpus plans a grid for that many GPUs", 2, ["--gpus", 4]),
            ("--tp beside --budget-mb", "so --tp would be replaced", 2, ["--budget-mb", 8, "--tp", 2]),
            ("--recompute beside --budget-mb", "so --recompute would be replaced", 2,
             ["--budget-mb", 8, "--recompute", "full"]),
            ("--schedule gpipe beside --budget-mb", "--budget-mb plans the memory of 1F1B", 2,
             ["--budget-mb", 8, "--schedule", "gpipe"]),
            ("--dump /dev/full", "--dump /dev/full is not a regular file", 2, ["--dump", "/dev/full"]),
            ("--dump a FIFO (no hang)", "is not a regular file", 2, ["--dump", f"{BAD}/fifo"]),
            ("--tp x --pp past the ranks (no overflow)", "= 4294967296 is more than the 2 ranks", 2,
             ["--tp", 65536, "--pp", 65536]),
            ("--micro not dividing the rows", "--micro 3 does not divide a replica's 4 rows", 2, ["--micro", 3]),
            ("7 stages for 6 units", "7 stages for 6 units", 7, ["--pp", 7]),
            ("--tp 4 --vocab 250", "4 ranks cannot split 250 tokens", 4, ["--tp", 4, "--vocab", 250]),
            ("--layers 4096 (memory)", "but this machine has", 2, ["--layers", 4096, "--device", "cpu"])):
        cs.append(refused(f"lab07 {name} np={np} (one line)", pattern, mpi_q(np, "build/lab07", *argv), l7, only=True))
    cs += [
        Case("labs", "lab07_solution np=6 --tp 2 --pp 3 --figure (the grid and its links)",
             " ".join(mpi(6, "build/lab07_solution", "--tp", 2, "--pp", 3, "--micro", 4, "--steps", 2, "--no-ref",
                          "--figure", "build/lab07-grid.svg"))
             + f" && {svg} build/lab07-grid.svg --rects-at-least 9", 300, needs=[have("lab07_solution")]),
        Case("labs", "lab06_solution np=2 --recompute full --recompute-figure",
             " ".join(mpi(2, "build/lab06_solution", "--steps", 2, "--layers", 2, "--no-ref", "--recompute", "full",
                          "--recompute-figure", "build/lab06-recompute.svg"))
             + f" && {svg} build/lab06-recompute.svg --rects-at-least 5 --circles 3", 300, needs=s),
    ]
    # Several nodes, tried on one machine (scripts/multinode.sh): two network
    # namespaces joined by a veth pair are node1 and node2, 2 ranks on each,
    # shared memory inside a node and TCP between, started by the README's
    # commands. Skipped where namespaces cannot be made.
    mn, n = "scripts/multinode.sh", [solutions, nodes]
    cs += [
        Case("labs", "two nodes: a rank stopped on node2 is named, and node1's ranks say they wait for it",
             [mn, "freeze"], 90, alone=True, needs=n),
        Case("labs", "two nodes: the README's \"Several nodes\" commands are the ones run here", [mn, "readme"], 10,
             needs=n),
        Case("labs", "two nodes: each rank's comm_local_rank() is its rank mod 2", [mn, "local-ranks"], 60, needs=n),
        Case("labs", "two nodes: lab02_solution np=4 bucketed",
             [mn, "run", "build/lab02_solution", "--steps", "2", "--layers", "2", "--strategy", "bucketed"], 120, needs=n),
        Case("labs", "two nodes: lab03_solution np=4 stage 3",
             [mn, "run", "build/lab03_solution", "--steps", "2", "--layers", "2", "--dim", "128", "--stage", "3"], 120,
             needs=n),
        Case("labs", "two nodes: lab04_solution np=4 --tp 2 (a tensor-parallel group on each node)",
             [mn, "run", "build/lab04_solution", "--steps", "2", "--layers", "2", "--tp", "2"], 120, needs=n),
        Case("labs", "two nodes: lab05_solution np=4 1f1b (stage 1 sends to stage 2 across)",
             [mn, "run", "build/lab05_solution", "--steps", "2", "--layers", "2", "--schedule", "1f1b", "--micro", "4"],
             120, needs=n),
        Case("labs", "two nodes: lab06_solution np=4 (one tensor-parallel group over both)",
             [mn, "run", "build/lab06_solution", "--steps", "2", "--layers", "2", "--seq", "32"], 120, needs=n),
        Case("labs", "two nodes: ranks of a node talking over TCP are seen (--mca btl self,tcp)",
             [mn, "run", "--mca", "btl", "self,tcp", "build/lab02_solution", "--steps", "2", "--layers", "2"], 120,
             Fail("talked over TCP, not shared memory"), needs=n),
    ]
    return cs


# The runs whose margins the yardstick's matrix found smallest (bf16's:
# np3-stage2-bf16, 0.83 of its bound at worst over 9 seeds and 5 kernels;
# np4-dp2-pp2-bf16, 0.79 over 10 seeds and 4 kernels; lab04's np2-bf16, 0.82
# over 2 seeds and 4 kernels; lab06's np2-bf16, of the same name, 0.84 over 3
# seeds and 4 kernels).
CLOSEST = "np4-1f1b-m8,np3-heads6,np4-naive-accum2,np3-stage1,np3-stage2-bf16,np4-dp2-pp2-bf16,np2-bf16"


def grader():
    s = [solutions]
    reports = "/usr/bin/python3 grader/tests/check_reports.py"
    g = " ".join(GRADE)

    def planted(lab):
        # Small patches against a solution, one classic bug each: each must
        # fail with the diagnosis its EXPECT line names (a planted deadlock
        # among them), and each legal variant (EXPECT: PASS) must pass.
        return Case("grader", f"planted bugs of {lab}", GRADE + ["--lab", lab, "--mutants", f"grader/mutants/{lab}/"]
                    + MUTANTS, 900, needs=s)

    def adversarial(name, pattern, forbidden="", lab="lab02", runs="np2-bucketed", hidden=""):
        # A submission that tries to cheat or to break the grader (with
        # `hidden`, graded with that hidden seed too).
        return Case("grader", f"adversarial submission: {name}",
                    ["tests/scripts/adversarial.sh", lab, runs, name, pattern, forbidden]
                    + ([hidden] if hidden else []), 300, needs=s)

    # The reference solutions pass, with valid reports for Gradescope and
    # JUnit (hidden runs included); the unfinished student files fail. The
    # longest jobs first, two at a time.
    cs = [
        Case("grader", "grade --solutions of ref and labs 01 to 03 (json, junit)",
             f"{g} --solutions --lab ref,lab01,lab02,lab03 --json build/results.json --junit build/results.xml && "
             f"{reports} build/results.json build/results.xml", 900, needs=s),
        planted("lab03"), planted("lab01"), planted("lab02"),
        Case("grader", "grade --solutions of labs 04 to 07 (json, junit)",
             f"{g} --solutions --lab lab04,lab05,lab06,lab07 --json build/results-b.json --junit build/results-b.xml && "
             f"{reports} build/results-b.json build/results-b.xml", 900, needs=s),
        planted("lab04"), planted("lab05"), planted("lab06"), planted("lab07"),
    ]
    # Correct code passes on other machines' rounding: the closest runs, the
    # solutions and legal variants, under another OpenBLAS kernel (Prescott:
    # SSE3, no FMA, the rounding furthest from this machine's FMA kernels),
    # where this CPU runs it. Haswell, SkylakeX and Zen, over seeds, are
    # `make yardstick`'s (the suite's 15 minutes do not hold them all).
    for ct in ("Prescott",):
        cs.append(Case("grader", f"the closest runs under OPENBLAS_CORETYPE={ct}: solutions and legal variants pass",
                       ["tests/scripts/closest-runs.sh", ct, CLOSEST], 600, needs=s + [cpu_kernel(ct)]))
    cs += [
        # Hidden runs (a second seed, marked hidden in the reports), on the
        # fastest lab.
        Case("grader", "grade --solutions --hidden-seed (json, junit)",
             f"{g} --solutions --lab lab01 --json build/results-hidden.json --junit build/results-hidden.xml "
             f"--hidden-seed 4242 && {reports} build/results-hidden.json build/results-hidden.xml && "
             "grep -q '\"visibility\": \"hidden\"' build/results-hidden.json", 300, needs=s),
        # Negative controls of the tolerances. One row of a weight matrix (512
        # of 867,072 parameters) off by a tenth of an AdamW step (lr = 1e-3)
        # is caught by the bulk; one element off by 0.1 is further than AdamW
        # can move an element in 8 steps (Adam's reach), and is caught by
        # that. (One element off by a whole step is not an error a bug makes
        # alone: correct code on another BLAS kernel moves a few elements that
        # far; see the README's Grader section.)
        Case("grader", "grade rejects a reference run with one row perturbed by a tenth of a step",
             GRADE + ["--solutions", "--lab", "ref", "--quick", "--perturb", "param/final/block1.mlp.w1:512:1e-4:512"],
             300, Fail("worst: block1.mlp.w1"), needs=s),
        Case("grader", "grade rejects a reference run with one element beyond Adam's reach",
             GRADE + ["--solutions", "--lab", "ref", "--quick", "--perturb", "param/final/block1.mlp.w1:17:0.1"], 300,
             Fail("further from the reference's than AdamW can move"), needs=s),
        # A grading's time budget: the runs left when it is spent fail unrun.
        Case("grader", "grade --budget: the runs past the grading's budget fail, unrun",
             GRADE + ["--solutions", "--lab", "lab02", "--budget", "1"], 120,
             Fail("graded within the time budget"), needs=s),
        Case("grader", "a stale planted bug is refused", ["tests/scripts/stale-mutant.sh"], 120,
             Fail("no longer applies"), needs=s),
        Case("grader", "grader: a late usage error writes its reports and cleans up",
             ["tests/scripts/late-usage-error.sh"], 120, needs=s),
        # Each file under grader/tests/adversarial/NAME/ is a submission that
        # tries to cheat or to break the grader: graded with --submission, it
        # must fail saying PATTERN (and never FORBIDDEN), with results.json
        # written, the work directory removed and no process of it left.
        adversarial("exec_solution", "not written yet"),
        adversarial("read_answers", "not written yet", "SIGABRT"),
        # The daemon is ended with its run without costing the run its limit.
        adversarial("daemon", "not written yet", "endless loop"),
        adversarial("big_file", "SIGXFSZ"),
        adversarial("atexit_rewrite", "not written yet"),
        adversarial("hooks_reset", "harness_hooks is called once"),
        adversarial("malformed_loss", "the dump's loss is text, not numbers"),
        adversarial("malformed_unfinished", "check/unfinished/ddp_sync_params is empty"),
        adversarial("no_world_size", "the dump has no meta/world_size"),
        adversarial("include_secret", "are not about lab02_ddp/ddp.c itself", "root:x:0"),
        adversarial("pmpi_allreduce", "ddp.c calls PMPI_Allreduce"),
        adversarial("late_cleanup", "core_add_cleanup after the harness started"),
        adversarial("erase_measures", "mem_reset_peaks after the harness sealed its measures"),
        adversarial("oldpwd_solution", "not written yet"),
        adversarial("symlink_solution", "is a symbolic link"),
        # Memory no allocator call makes, and the levers around the measures.
        adversarial("real_malloc", "ddp.c calls __real_malloc"),
        adversarial("mmap_hoard", "ddp.c calls mmap"),
        adversarial("static_hoard", "memory that no allocator call made"),
        adversarial("syscall_asm", "makes system calls of its own"),
        # The same calls by a `syscall` hidden inside another instruction's
        # bytes, which the object scan cannot see: the graded run's sandbox
        # (seccomp, common/sandbox.h) refuses them, and the grader names it.
        adversarial("hidden_fork", "the sandbox of a graded run refused fork"),
        adversarial("hidden_shm", "the sandbox of a graded run refused shmget"),
        Case("grader", "adversarial submission: hidden_open, and nothing is left in /run/lock",
             "tests/scripts/adversarial.sh lab02 np2-bucketed hidden_open "
             "'the sandbox of a graded run refused open for writing' && ! ls /run/lock/pl-adversary-left 2>/dev/null",
             300, needs=s),
        adversarial("defines_fopen", "ddp.c defines fopen"),
        # Code that runs before main, where the sandbox is not closed yet: a
        # resolver the loader calls (IFUNC), and a constructor (the hoard's).
        adversarial("ifunc_resolver", "IFUNC ddp_adversary_count"),
        Case("grader", "adversarial submission: pre_seal_hoard's constructor, named as code before main",
             ["tests/scripts/adversarial.sh", "lab02", "np2-bucketed", "pre_seal_hoard",
              "has code that runs before main or after it (.init_array"], 300, needs=s),
        # Memory touched before the seal, bytes moved around the counters.
        adversarial("pre_seal_hoard", "memory was touched before the harness's seal"),
        adversarial("helper_tensor", "inside the training steps, moving"),
        adversarial("shared_window", "ddp.c calls comm_shared_alloc"),
        # The lab's parallelism itself, not its side effects: lab04 computing
        # whole layers, lab05's 1F1B in GPipe's order with its micro-batches
        # "ended" between their passes, lab06's LayerNorms on the whole sequence.
        adversarial("lab04_whole_layers", "a rank computed whole layers", lab="lab04", runs="np2"),
        adversarial("lab05_gpipe_as_1f1b", "were freed before its backward pass", lab="lab05", runs="np3-1f1b-m8"),
        adversarial("lab06_whole_sequence", "the LayerNorms ran on more than this rank's tokens", lab="lab06",
                    runs="np2"),
        # Fitted to what a fixed list of runs grades: lab07's choice answered
        # from the README (right at 4 GPUs within 8 MB, wrong at the other
        # budgets and GPUs the grader asks), and a file that reads its run's
        # HOME and TMPDIR to tell a hidden run from a listed one, which must
        # learn nothing there: every run, hidden ones included, fails the
        # same way (its hooks unwritten), none by the abort it makes in a run
        # it can place.
        adversarial("lab07_readme_choice", "grid_choose did not choose the planner's fastest", lab="lab07",
                    runs="np4-budget-8mb,plan-gpus8-8mb,plan-gpus16-5mb-layers6"),
        adversarial("hidden_by_home", "not written yet", "SIGABRT", runs="np2-bucketed,hidden", hidden="4242"),
        # lab07's data-parallel average cut into thousands of calls.
        adversarial("lab07_split_allreduce", "the same bytes in", lab="lab07", runs="np2-dp2"),
        # As root, a submission is built as untrusted as it runs.
        Case("grader", "a submission's build is sandboxed: the solution by path, /dev/zero, /dev/stdin",
             ["tests/scripts/sandboxed-build.sh"], 400, needs=s + [root]),
        # As root, a run has its own /tmp, /var/tmp and /dev/shm: what it
        # leaves there is gone with it.
        Case("grader", "adversarial submission: leaves_files, and what it left in /tmp, /var/tmp, /dev/shm, "
             "/run/lock and System V shared memory is gone",
             "tests/scripts/adversarial.sh lab02 np2-bucketed leaves_files 'not written yet' && "
             "! ls /tmp/pl-adversary-left /var/tmp/pl-adversary-left /dev/shm/pl-adversary-left "
             "/run/lock/pl-adversary-left 2>/dev/null && ! ipcs -m | grep -qi 0x504c4146", 300,
             needs=s + [root]),
    ]
    return cs


def release():
    s = [solutions]
    return [
        Case("release", "student release: builds, the READMEs' commands work, the unfinished files fail and score 0",
             ["tests/scripts/student-release.sh"], 900, needs=s),
        Case("release", "a release of lab01 and lab02 alone: only they are in it, and graded",
             ["tests/scripts/release-lab01-lab02.sh"], 600, needs=s),
        Case("release", "a release of lab07 comes with labs 05 and 06 and the two answers it links, and is graded",
             ["tests/scripts/release-lab07.sh"], 600, needs=s),
        Case("release", "gpu-check --dry-run: pre-flight, bundle, budget, table", ["tests/scripts/gpu-check-dry-run.sh"],
             240, needs=s),
    ]


def cases(group):
    return {"unit": unit, "labs": labs, "grader": grader, "release": release}[group]()
