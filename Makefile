# Parallelism labs. GNU make.
#
#   make            build the library, every program and the tests into build/
#   make deps       install the Debian/Ubuntu packages the course needs (scripts/deps.sh --check says
#                   which target needs which)
#   make demo       (installs what it needs: a compiler, Open MPI, OpenBLAS; builds it) the showcase
#   make test       (installs what is missing, builds) run every test (tests/README.md)
#   make test-unit, test-labs, test-grader, test-release  one group of them
#   make bench      the three CPU benchmarks below in one table (build/bench.md)
#   make bench-ref  tokens/s of build/ref against PyTorch and the sgemm ceiling
#   make bench-lab02  data-parallel step times against PyTorch DDP
#   make bench-gpu  tokens/s and MFU of build/ref on one GPU (GPT-2 small), fp32 and TF32
#   make plan-bench  build/plan's step time against lab05's and lab06's measured, with this
#                   machine's alpha-beta (lab01's fit) and sgemm rate
#   make gpu-check  the GPU path checked in one go, one table (needs a GPU)
#   make yardstick  the grader on every legitimate rounding (OpenBLAS kernels, ARCH, ROUNDING=alt)
#                   and on every planted bug: each check's separation (about an hour; build/yardstick/)
#   make lab03-figure the ZeRO paper's memory table, measured, as build/lab03-memory.svg
#   make lab05-schedules lab05's five schedules on one time axis, as docs/figures/lab05-schedules.svg
#   make labNN      build a lab (build/labNN from your file, and the solution)
#   make check-labNN  grade your file of one lab (the fast subset of runs)
#   make grade      grade every lab (build/grade --help: --solutions, --json, ...)
#   make student-release  the tree without solutions, as a tarball in dist/ (LABS="lab01 lab02": those labs only)
#   make clean
#
# Variables: CUDA=0|1 (default: 1 when nvcc is found), ARCH (default native: the
# instruction set, e.g. ARCH=znver3 for a cluster's compute nodes), NP (ranks for demo),
# SAN=1 (AddressSanitizer and UndefinedBehaviorSanitizer, into the same build/:
# switching SAN rebuilds everything; a crash is then named by file and line).

SHELL := /bin/bash
# No built-in rules: none is used, and make would try each of them (RCS,
# SCCS, yacc, ...) for every file it considers, 2 s of CPU before every
# build, every make check-labNN and every grading's build.
MAKEFLAGS += --no-builtin-rules
.SUFFIXES:
.DEFAULT_GOAL := all
BUILD := build
OBJ := $(BUILD)/obj

# ---- toolchain and libraries, found rather than assumed --------------------
# Found once and kept in build/config.mk (every make, and the grader runs
# make several times a grading, would otherwise ask mpicc and pkg-config
# again); kept only when everything is found, so that a package installed
# later is seen; make clean forgets it.
CC := gcc
CONFIG := $(BUILD)/config.mk
-include $(CONFIG)
ifndef CONFIG_FOUND
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS := $(shell mpicc --showme:link 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS := $(shell pkg-config --libs openblas 2>/dev/null)
NVCC := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
ifneq ($(and $(MPI_CFLAGS),$(MPI_LIBS),$(CHECK_LIBS),$(BLAS_LIBS)),)
$(shell mkdir -p $(BUILD); printf '%s\n' 'CONFIG_FOUND := 1' 'MPI_CFLAGS := $(MPI_CFLAGS)' 'MPI_LIBS := $(MPI_LIBS)' \
  'CHECK_CFLAGS := $(CHECK_CFLAGS)' 'CHECK_LIBS := $(CHECK_LIBS)' 'BLAS_CFLAGS := $(BLAS_CFLAGS)' \
  'BLAS_LIBS := $(BLAS_LIBS)' 'NVCC := $(NVCC)' > $(CONFIG).tmp && mv $(CONFIG).tmp $(CONFIG))
endif
endif
CUDA ?= $(if $(NVCC),1,0)
CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC))

# ARCH: the instruction set the C code is compiled for. native (the default)
# is this machine's; a cluster whose login node differs from its compute
# nodes builds for the compute nodes by name: make ARCH=znver3,
# ARCH=sapphirerapids, or ARCH=x86-64-v3 (any AVX2 machine) / x86-64-v4
# (AVX-512). -fno-trapping-math lets the compiler vectorize the loops whose
# exp clamps its argument (GELU, the softmaxes): nothing here reads the
# floating-point exception flags, and no result changes. -ffp-contract=fast
# lets it fuse a * b + c into one FMA instruction (one rounding instead of
# two, as nvcc does by default): -std=c11 turns that off, and GELU's and
# exp's polynomials are chains of them (GELU a quarter faster).
ARCH ?= native
# ROUNDING=alt: every program rounds as another machine would (ops.h's
# ops_set_rounding: libm's exp, split-K matrix products, attention by sgemm),
# to check that the grader's yardstick covers another device's rounding.
ROUNDING ?= native
OPT ?= -O3 -march=$(ARCH) -fno-math-errno -fno-trapping-math -ffp-contract=fast
CFLAGS := -std=c11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Icommon -pthread \
          $(MPI_CFLAGS) $(BLAS_CFLAGS)
# The debug information names files relative to the tree, not by the tree's
# path (the grader's copy of the tree holds the trusted build's objects,
# which would otherwise lead a submission back to the trusted tree). Outside
# CFLAGS, so that a copy of the tree elsewhere does not rebuild everything.
DEBUG_MAP := -fdebug-prefix-map=$(CURDIR)=.
# The independent memory measure: every allocator call in the program's own
# code goes through common/mem.c (see mem.h).
ifeq ($(ROUNDING),alt)
  CFLAGS += -DPL_ROUNDING_ALT=1
endif
WRAP := $(foreach f,malloc calloc realloc reallocarray free posix_memalign aligned_alloc memalign,-Wl,--wrap=$(f))
LDLIBS := $(MPI_LIBS) $(BLAS_LIBS) -lm -pthread

# SAN=1: sanitizers. LeakSanitizer is off: Open MPI unloads its components
# at MPI_Finalize, so what they keep until exit is reported from an
# "<unknown module>" that no suppression can name, and every exit code would
# turn into 1 (mem.h's own counts still show the course's leaks). The
# allocator measure (WRAP) stays on: ASan replaces malloc itself and
# __wrap_malloc calls it, so the count and ASan's checks both see every
# allocation. CUDA's runtime maps the range ASan guards: protect_shadow_gap=0.
SAN ?= 0
ifeq ($(SAN),1)
  SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  CFLAGS := $(filter-out -O3,$(CFLAGS)) -O1
  CFLAGS += $(SAN_FLAGS)
  LDLIBS += $(SAN_FLAGS)
  export ASAN_OPTIONS := protect_shadow_gap=0:detect_leaks=0
  export UBSAN_OPTIONS := print_stacktrace=1
endif

# CUDA=1: real code for the A100 (sm_80) and the H100/H200 (sm_90), and PTX
# that newer GPUs compile when they load it; cuBLAS for the matrix
# products, NCCL for communication between GPUs.
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
ifeq ($(CUDA),1)
  CFLAGS += -DPL_CUDA=1 -I$(CUDA_HOME)/include
  NVCCFLAGS := -O3 -g -std=c++17 -Icommon -DPL_CUDA=1 $(MPI_CFLAGS) $(CUDA_ARCH) \
               -Xcompiler -Wall,-Wextra,-fPIC --Werror all-warnings
  # The CUDA libraries are the backend's (build/libplcuda.so, below), not
  # the programs': they load it when a rank uses a GPU.
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lnccl -lcudart
  # nvcc's launch code for a kernel guards a static with the C++ runtime
  # (__cxa_guard_acquire), which gcc does not link by itself.
  CUDA_LIBS += -lstdc++
  LDLIBS += -ldl -Wl,--dynamic-list=$(BUILD)/cuda-imports.list -Wl,@$(BUILD)/cuda-imports.ld
endif

# Objects are remade when the flags that made them change: the C files'
# with SAN, ARCH, OPT or CUDA, the CUDA files' with CUDA_ARCH. Each kind
# depends on a file holding its compiler's command line, rewritten when that
# differs from the last build's (and only then, so nothing else is remade).
C_STAMP := $(BUILD)/.cflags
CU_STAMP := $(BUILD)/.nvccflags
# Only a make that may compile rewrites them: `make student-release CUDA=0`
# (a script packing a release it then builds without CUDA) must not mark
# every object of this tree stale, to be compiled again by the next make,
# while other programs of the tree run.
NO_BUILD_GOALS := student-release clean help deps check-deps print-opt
ifneq ($(filter-out $(NO_BUILD_GOALS),$(or $(MAKECMDGOALS),all)),)
$(shell mkdir -p $(BUILD); [ "$$(cat $(C_STAMP) 2>/dev/null)" = "$(CC) $(CFLAGS)" ] || echo "$(CC) $(CFLAGS)" > $(C_STAMP))
$(shell [ "$$(cat $(CU_STAMP) 2>/dev/null)" = "$(NVCC) $(NVCCFLAGS)" ] || echo "$(NVCC) $(NVCCFLAGS)" > $(CU_STAMP))
endif

# ---- sources ---------------------------------------------------------------
# The CUDA backend (CUDA=1): the kernels, device memory and NCCL, a library
# of their own, build/libplcuda.so, that a program loads when a rank uses a
# GPU (common/cuda_backend.c); the programs need none of the CUDA libraries.
CUDA_C := common/comm_nccl.c
COMMON_C := $(filter-out $(CUDA_C),$(wildcard common/*.c))
COMMON_OBJ := $(COMMON_C:%.c=$(OBJ)/%.o)
LIB := $(BUILD)/libcommon.a
ifeq ($(CUDA),1)
PLCUDA := $(BUILD)/libplcuda.so
PLCUDA_OBJ := $(patsubst %.cu,$(OBJ)/%.cu.o,$(wildcard common/*.cu)) $(CUDA_C:%.c=$(OBJ)/%.pic.o)
endif

TOOLS := $(BUILD)/ref $(BUILD)/dumptool $(BUILD)/hello $(BUILD)/sgemm_rate $(BUILD)/gpu_check $(BUILD)/plan
# build/ppfigure draws lab05's schedules: a release without lab05 has none.
TOOLS += $(if $(wildcard lab05_pipeline/schedule_given.c),$(BUILD)/ppfigure)

# Unit tests: plain programs (Check, fork mode) and MPI programs (run under
# mpirun by tests/runner.py, Check in no-fork mode).
TEST_SRC := $(wildcard common/tests/test_*.c)
TESTS := $(TEST_SRC:common/tests/%.c=$(BUILD)/tests/%)
TEST_HELPERS := $(BUILD)/tests/args_prog $(BUILD)/tests/deadlock $(BUILD)/tests/bf16_probe

# Labs: labNN_topic/main.c (the harness, with any *_given.c beside it: code
# the lab gives) with the student's file (the other .c beside them) makes
# build/labNN; with solution/<same name>.c instead,
# build/labNN_solution. `make labNN` builds both.
# A student release has no solution/ folders; their binaries are then not made.
LAB_DIRS := $(sort $(patsubst %/main.c,%,$(wildcard lab[0-9][0-9]_*/main.c)))
lab_id = $(word 1,$(subst _, ,$(1)))
LAB_BINS := $(foreach d,$(LAB_DIRS),$(BUILD)/$(call lab_id,$(d)) \
          $(if $(wildcard $(d)/solution/*.c),$(BUILD)/$(call lab_id,$(d))_solution))

# The grader's checks (everything in grader/ but grade.c, which runs and
# reports) are a library of their own: the lab programs link it too and
# grade themselves with it at the end of a run (grader/verdict.h).
VERDICT_SRC := $(filter-out grader/grade.c,$(wildcard grader/*.c))
VERDICT := $(BUILD)/libverdict.a
GRADER := $(BUILD)/grade

# The grader's own unit test: its arithmetic (grader/tests/test_grader.c).
GRADER_TEST := $(BUILD)/tests/test_grader
# The planner's (grader/tests/test_plan.c).
PLAN_TEST := $(BUILD)/tests/test_plan

PROGRAMS := $(TOOLS) $(TESTS) $(TEST_HELPERS) $(LAB_BINS) $(GRADER) $(GRADER_TEST) $(PLAN_TEST)

.PHONY: all deps check-deps demo test test-run test-unit test-labs test-grader test-release tests clean help bench bench-ref bench-lab02 bench-gpu plan-bench gpu-check print-opt lab03-figure grade student-release yardstick
all: $(PROGRAMS)
tests: $(TESTS) $(TEST_HELPERS) $(PLAN_TEST)

help:
	@sed -n '/^#/!q; s/^# \{0,1\}//p' Makefile

# ---- dependencies ----------------------------------------------------------
deps:
	@scripts/deps.sh

# Say exactly what is missing before the compiler does, less clearly: the
# compiler, Open MPI and OpenBLAS for every program; Check for the unit tests.
$(BUILD)/.deps-ok: scripts/deps.sh
	@scripts/deps.sh --check demo
	@mkdir -p $(BUILD) && touch $@
$(BUILD)/.deps-check-ok: scripts/deps.sh
	@scripts/deps.sh --check build
	@mkdir -p $(BUILD) && touch $@

check-deps: $(BUILD)/.deps-ok

# ---- compile and link ------------------------------------------------------
$(OBJ)/%.o: %.c $(C_STAMP) | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEBUG_MAP) -MMD -MP -c $< -o $@

$(OBJ)/%.cu.o: %.cu $(CU_STAMP) | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Xcompiler $(DEBUG_MAP) -c $< -o $@

# The CUDA backend's library: its code position-independent, its own calls
# bound to its own functions (-Bsymbolic: the programs have functions of the
# same names that stand for them), the course's functions it calls and the
# counted allocator taken from the program that loads it, which exports
# them (cuda-imports.list: what its objects call that libcommon defines).
ifeq ($(CUDA),1)
$(OBJ)/%.pic.o: %.c $(C_STAMP) | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC $(DEBUG_MAP) -MMD -MP -c $< -o $@
$(PLCUDA): $(PLCUDA_OBJ)
	$(CC) -shared $(CFLAGS) $(WRAP) -Wl,-Bsymbolic $^ -o $@ $(CUDA_LIBS) $(MPI_LIBS) -lm -pthread
# (cuda-imports.ld: the linker told to keep them in every program, which
# otherwise keeps only the objects of libcommon it calls.)
$(BUILD)/cuda-imports.list: $(PLCUDA_OBJ) $(LIB)
	@comm -12 <(nm -u $(PLCUDA_OBJ) | awk 'NF==2 {print $$2}' | sort -u) \
	    <(nm -g --defined-only $(LIB) | awk 'NF==3 {print $$3}' | sort -u) > $@.names
	@{ for f in malloc calloc realloc reallocarray free posix_memalign aligned_alloc memalign; do \
	   echo "__wrap_$$f"; done; cat $@.names; } > $@.all
	@{ echo '{'; sed 's/$$/;/' $@.all; echo '};'; } > $@.tmp && sed 's/^/--undefined=/' $@.all > $(BUILD)/cuda-imports.ld
	@rm -f $@.names $@.all && mv $@.tmp $@
$(BUILD)/cuda-imports.ld: $(BUILD)/cuda-imports.list
$(PROGRAMS): | $(PLCUDA) $(BUILD)/cuda-imports.list
endif

$(LIB): $(COMMON_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%: $(OBJ)/tools/%.o $(LIB)
	$(CC) $(CFLAGS) $(WRAP) $^ -o $@ $(LDLIBS)

$(BUILD)/%: $(OBJ)/bench/%.o $(LIB)
	$(CC) $(CFLAGS) $(WRAP) $^ -o $@ $(LDLIBS)

# Check's static library calls the allocator too, so it comes before the
# library that holds the wrapped allocator.
$(BUILD)/tests/%: $(OBJ)/common/tests/%.o $(BUILD)/libtestutil.a $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(WRAP) $(filter-out $(LIB),$^) $(CHECK_LIBS) $(LIB) -o $@ $(LDLIBS)

$(BUILD)/libtestutil.a: $(OBJ)/common/tests/testutil.o $(OBJ)/common/tests/testutil_mpi.o
	@rm -f $@
	ar rcs $@ $^

$(OBJ)/common/tests/%.o: CFLAGS += $(CHECK_CFLAGS)
# The unit tests need Check: said before their compiler says it less clearly.
CHECK_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(wildcard common/tests/*.c grader/tests/*.c))
$(CHECK_OBJS): | $(BUILD)/.deps-check-ok

$(VERDICT): $(VERDICT_SRC:%.c=$(OBJ)/%.o)
	@rm -f $@
	ar rcs $@ $^

$(GRADER): $(OBJ)/grader/grade.o $(VERDICT) $(LIB)
	$(CC) $(CFLAGS) $(WRAP) $^ -o $@ $(LDLIBS)

$(OBJ)/grader/tests/%.o: CFLAGS += $(CHECK_CFLAGS) -Igrader -Icommon/tests
$(GRADER_TEST): $(OBJ)/grader/tests/test_grader.o $(BUILD)/libtestutil.a $(VERDICT) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(WRAP) $(filter-out $(LIB),$^) $(CHECK_LIBS) $(LIB) -o $@ $(LDLIBS)
$(PLAN_TEST): $(OBJ)/grader/tests/test_plan.o $(BUILD)/libtestutil.a $(VERDICT) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(WRAP) $(filter-out $(LIB),$^) $(CHECK_LIBS) $(LIB) -o $@ $(LDLIBS)

# A lab whose given code is other labs' answers names their sources in
# LAB_USES_<dir> (compiled as those labs compile them, linked into both of
# its programs), the labs in LAB_BUILT_ON_<dir>, and their headers' folders
# in LAB_INCLUDES_<dir>. lab07, the capstone: each pipeline stage runs
# lab06's sequence parallelism on lab06's split layers, and lab05's
# schedules drive the micro-batches. It is released only with those labs
# (student-release, below).
LAB_USES_lab07_3d_parallel := lab05_pipeline/solution/pipeline.c lab06_sequence_parallel/solution/sp.c \
                              lab06_sequence_parallel/tp_given.c
LAB_BUILT_ON_lab07_3d_parallel := lab05 lab06
LAB_INCLUDES_lab07_3d_parallel := -Ilab05_pipeline -Ilab06_sequence_parallel

define LAB_RULES
$(1)_ID := $(word 1,$(subst _, ,$(1)))
$(1)_HARNESS := $(1)/main.c $(wildcard $(1)/*_given.c) $(LAB_USES_$(1))
$(1)_STUDENT := $$(filter-out $$($(1)_HARNESS),$$(wildcard $(1)/*.c))
$(1)_SOLUTION := $$(patsubst $(1)/%,$(1)/solution/%,$$($(1)_STUDENT))
$(OBJ)/$(1)/%.o: CFLAGS += -I$(1) -Igrader $(LAB_INCLUDES_$(1))
$(BUILD)/$$($(1)_ID): $$($(1)_HARNESS:%.c=$(OBJ)/%.o) $$($(1)_STUDENT:%.c=$(OBJ)/%.o) $(VERDICT) $(LIB)
	$(CC) $(CFLAGS) $(WRAP) $$^ -o $$@ $(LDLIBS)
$(BUILD)/$$($(1)_ID)_solution: $$($(1)_HARNESS:%.c=$(OBJ)/%.o) $$($(1)_SOLUTION:%.c=$(OBJ)/%.o) $(VERDICT) $(LIB)
	$(CC) $(CFLAGS) $(WRAP) $$^ -o $$@ $(LDLIBS)
.PHONY: $$($(1)_ID) check-$$($(1)_ID)
$$($(1)_ID): $(BUILD)/$$($(1)_ID) $(if $(wildcard $(1)/solution/*.c),$(BUILD)/$$($(1)_ID)_solution) $(BUILD)/ref
	@$(if $(wildcard $(1)/solution/*.c),:,echo "built $(BUILD)/$$($(1)_ID) from your file; a student release has no $(BUILD)/$$($(1)_ID)_solution: the sample output in $(1)/README.md shows what it prints")
# Grade the student's file of this lab, the fast subset of runs. Their
# calls are short: a watchdog of 10 s ends a deadlocked run (with each
# rank's line) in seconds, not minutes.
check-$$($(1)_ID): $(BUILD)/grade $(BUILD)/$$($(1)_ID) $(BUILD)/ref
	$(BUILD)/grade --lab $$($(1)_ID) --quick --watchdog 10
endef
$(foreach d,$(LAB_DIRS),$(eval $(call LAB_RULES,$(d))))

# ---- run -------------------------------------------------------------------
NP ?= 4
# mpirun refuses to run as root unless told, and needs --oversubscribe for
# more ranks than cores; both are harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
MPIRUN := mpirun --oversubscribe

# demo and test install what is missing first, then build in a fresh make so
# the library flags above are found again.
# In a student release there are no solutions: the demo and the figure run
# the student's own lab03, and say so (an unfinished one fails its verdict,
# which then says what is missing; make does not stop on that).
LAB03_SOLVED := $(wildcard lab03_zero/solution/*.c)
LAB03_BIN := $(BUILD)/$(if $(LAB03_SOLVED),lab03_solution,lab03)
LAB03_RUN = $(if $(wildcard lab03_zero/main.c),$(if $(LAB03_SOLVED),$(1),@echo "(a student release: this runs your own build/lab03)"; $(1) || \
            echo "(your lab03 does not pass yet: its verdict above says what is missing)"),@echo "lab03 is not in this release: this target runs lab03")

# The demo needs only what it runs (scripts/deps.sh demo: no Check, no PyTorch).
demo:
	@scripts/deps.sh demo
	@$(MAKE) --no-print-directory $(if $(wildcard lab03_zero/main.c),$(LAB03_BIN)) $(BUILD)/ref
	$(call LAB03_RUN,$(MPIRUN) -q -np $(NP) $(LAB03_BIN) --stage 3 --steps 20)

test:
	@scripts/deps.sh test
	@$(MAKE) --no-print-directory test-run

test-run: all
	@tests/runner.py

# One group of the tests (tests/cases.py says which cases are in it).
test-unit test-labs test-grader test-release: all
	@tests/runner.py $(patsubst test-%,%,$@)

# The grader over every lab's student file (build/grade --help for more).
grade: all
	$(BUILD)/grade

# The tree students get: everything tracked by git but the solutions, the
# grader's mutants and its adversarial submissions (each a solution with one
# cheat in it). LABS="lab01 lab02" packs only those labs (an instructor
# releasing them one at a time: lab06 gives lab04's answer away); the
# default is every lab. The release's grader grades the labs it holds.
#
# A lab built on other labs' answers (LAB_USES_<dir>: lab07, the capstone,
# on labs 05 and 06's) is released only with them: by default it is left
# out; named in LABS (with the labs it is built on), it comes with the
# answers it uses, which then give those labs away: release it once they
# are done (LABS="lab01 ... lab07").
RELEASE ?= dist/parallelism-labs-student.tar.gz
LABS ?=
BUILT_ON := $(foreach d,$(LAB_DIRS),$(if $(LAB_USES_$(d)),$(d)))
RELEASE_DROP := $(if $(LABS),,$(foreach d,$(BUILT_ON),$(call lab_id,$(d))))
RELEASE_BUILT := $(foreach d,$(BUILT_ON),$(if $(filter $(call lab_id,$(d)),$(LABS)),$(call lab_id,$(d))))
RELEASE_NEEDS := $(sort $(foreach d,$(BUILT_ON),$(if $(filter $(call lab_id,$(d)),$(LABS)),$(LAB_BUILT_ON_$(d)))))
RELEASE_MISSING := $(filter-out $(LABS),$(RELEASE_NEEDS))
RELEASE_GIVEN := $(foreach f,$(foreach d,$(BUILT_ON),$(if $(filter $(call lab_id,$(d)),$(LABS)),$(LAB_USES_$(d)))),$(if \
                   $(findstring /solution/,$(f)),$(f)))
student-release:
	@for l in $(LABS); do ls -d $${l}_*/ > /dev/null 2>&1 || { echo "LABS: there is no $$l (the labs: $(foreach d,$(LAB_DIRS),$(call lab_id,$(d))))"; exit 2; }; done
	@$(if $(RELEASE_MISSING),echo "LABS: $(RELEASE_BUILT) is built on $(RELEASE_NEEDS): name $(RELEASE_MISSING) too"; exit 2)
	@mkdir -p $(dir $(RELEASE))
	{ git ls-files | grep -v -E '^(lab[0-9][0-9]_[^/]*/solution/|grader/mutants/|grader/tests/adversarial/)'; \
	  for f in $(RELEASE_GIVEN); do echo $$f; done; } | \
	  awk -v labs="$(LABS)" -v drop="$(RELEASE_DROP)" 'BEGIN { n = split(labs, l, " "); for (i = 1; i <= n; i++) keep[l[i]] = 1; \
	    split(drop, d, " "); for (i in d) out[d[i]] = 1 } \
	    /^lab[0-9][0-9]_/ && ((n && !(substr($$0, 1, 5) in keep)) || (substr($$0, 1, 5) in out)) { next } { print }' | \
	  tar --transform 's,^,parallelism-labs/,' -czf $(RELEASE) -T -
	@echo "wrote $(RELEASE): $$(tar -tzf $(RELEASE) | wc -l) files, $(if $(RELEASE_GIVEN),no solutions but those $(RELEASE_GIVEN:%=%) that $(RELEASE_BUILT) is built on,no solutions)$(if $(LABS),; labs: $(LABS))$(if $(RELEASE_DROP),; left out: $(RELEASE_DROP) (built on other labs' answers: name it in LABS with them))"

# Benchmarks print figures; they are not tests.
bench-ref: all
	@bench/bench_ref.sh

bench-lab02: all
	@bench/bench_lab02.sh

# The planner's predicted step time against the labs' measured (docs/plan.md).
plan-bench: all
	@/usr/bin/python3 bench/plan_step.py

# The GPU: tokens/s and model FLOP utilisation of build/ref on a GPT-2-small
# shape (fp32 and TF32) against the card's peak; and the GPU path checked in
# one go (every op against the CPU, every lab's solution graded on the GPU,
# compute-sanitizer). Both need a GPU; elsewhere they say so.
bench-gpu: all
	@bench/bench_gpu.sh

# The three CPU benchmarks in one table, with the machine: build/bench.md.
bench: all
	@bench/bench_all.sh

# The flags the C code is compiled with (for the benchmarks' headers).
print-opt:
	@echo "$(OPT)"

# make gpu-check: the GPU path in one budgeted run, its table and logs in
# $OUT (build/gpu-check when unset); on a GPU machine without this course's
# libraries, carry scripts/gpu-bundle.sh's build/gpu-bundle (README, GPUs).
gpu-check:
	@scripts/gpu-check.sh

# build/gpu_check --training grades build/ref's GPU run with the grader's own
# checks (libverdict) against the rounding measured on both devices.
$(BUILD)/gpu_check: $(OBJ)/tools/gpu_check.o $(VERDICT) $(LIB)
	$(CC) $(CFLAGS) $(WRAP) $^ -o $@ $(LDLIBS) $(CUDA_LIBS)
$(OBJ)/tools/gpu_check.o: CFLAGS += -Igrader
# The planner: the labs' formulas (grader/plan.h, in the grader's library).
$(BUILD)/plan: $(OBJ)/tools/plan.o $(VERDICT) $(LIB)
	$(CC) $(CFLAGS) $(WRAP) $^ -o $@ $(LDLIBS)
$(OBJ)/tools/plan.o: CFLAGS += -Igrader

# build/ppfigure draws lab05's runs on one time axis from their dumps, with
# the grader's replay (libverdict) and lab05's own drawing of a schedule.
$(BUILD)/ppfigure: $(OBJ)/tools/ppfigure.o $(OBJ)/lab05_pipeline/schedule_given.o $(VERDICT) $(LIB)
	$(CC) $(CFLAGS) $(WRAP) $^ -o $@ $(LDLIBS)
$(OBJ)/tools/ppfigure.o: CFLAGS += -Igrader -Ilab05_pipeline

# Does correct code pass on every machine, and is every bug still caught?
yardstick: all
	@scripts/yardstick-matrix.sh $(BUILD)/yardstick

# Memory per rank by category for ZeRO stages 0 to 3, measured: an SVG.
NP_FIGURE ?= 4
lab03-figure: $(LAB03_BIN)
	$(call LAB03_RUN,$(MPIRUN) -np $(NP_FIGURE) $(LAB03_BIN) --stage 3 --steps 3 --figure $(BUILD)/lab03-memory.svg)

# lab05's five schedules at p = 4, m = 8 (--layers 6: interleaved's v = 2
# chunks a stage over p v = 8 units), replayed with equal stages and drawn
# on one time axis by build/ppfigure: docs/figures/lab05-schedules.svg. In a
# student release it runs the student's build/lab05, into
# build/lab05-schedules.svg (the tree's figure is the solution's).
LAB05_SOLVED := $(wildcard lab05_pipeline/solution/*.c)
LAB05_BIN := $(BUILD)/$(if $(LAB05_SOLVED),lab05_solution,lab05)
LAB05_SCHEDULES := gpipe 1f1b interleaved zb-h1 zb-h2
SCHEDULES_FIGURE := $(if $(LAB05_SOLVED),docs/figures,$(BUILD))/lab05-schedules.svg
.PHONY: lab05-schedules
ifneq ($(wildcard lab05_pipeline/main.c),)
lab05-schedules: $(LAB05_BIN) $(BUILD)/ppfigure
	@$(if $(LAB05_SOLVED),:,echo "(a student release: this runs your own build/lab05)")
	@for s in $(LAB05_SCHEDULES); do \
	  v=$$([ $$s = interleaved ] && echo "--virtual 2"); \
	  echo "$(LAB05_BIN) --schedule $$s$${v:+ $$v}: $(BUILD)/lab05-$$s.dump"; \
	  $(MPIRUN) -q -np 4 $(LAB05_BIN) --schedule $$s $$v --micro 8 --layers 6 --steps 2 --no-ref \
	    --dump $(BUILD)/lab05-$$s.dump > $(BUILD)/lab05-$$s.log 2>&1 || { tail -n 20 $(BUILD)/lab05-$$s.log; \
	    echo "$$s failed: $(BUILD)/lab05-$$s.log says why$(if $(LAB05_SOLVED),, (your lab05 does not pass yet))"; exit 1; }; \
	done
	$(BUILD)/ppfigure -o $(SCHEDULES_FIGURE) $(LAB05_SCHEDULES:%=$(BUILD)/lab05-%.dump)
else
lab05-schedules:
	@echo "lab05 is not in this release: this target runs lab05"
endif

clean:
	rm -rf $(BUILD)

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)
.SECONDARY:
