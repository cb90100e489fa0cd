# Makefile - builds the attention library, the service and their tests.
#
#   make            library (static and shared) and the server binary
#   make run        install missing Debian packages, build, serve on 127.0.0.1:8080
#   make test       library tests, then HTTP integration tests against a live server
#   make bench      kernel and wire benchmarks beside ONNX Runtime, PyTorch, OpenBLAS
#   make asan       the tests under AddressSanitizer + UBSan
#   make fuzz       libFuzzer targets (FUZZ_SECONDS each)
#   make lint       cppcheck over lib/ and server/, redocly over openapi.yaml,
#                   pyflakes over the Python scripts
#   make build-matrix  gcc and clang at -O0 -O1 -O2 -O3 -Os, warnings as errors
#   make test-models   the C translation models against PyTorch and over HTTP
#   make install       library, header, attn.pc and the server under PREFIX
#   make install-lib   the library alone (no libmicrohttpd or Jansson needed)
#   make clean
#
# CC, CFLAGS, CPPFLAGS, LDFLAGS, PREFIX and MODELS_OPT may be overridden.
# Warnings are errors only with WERROR=1 (set by .ci/run, make asan and make
# build-matrix), so a distribution's or a user's own flags and compiler still
# build. Objects carry automatic header dependencies (-MMD).
# Architecture-specific kernels choose their instruction set at run time
# (function target attributes), so the default build runs on any x86-64 or
# non-x86 CPU.

CC      ?= cc
CFLAGS  ?= -O2 -g
PREFIX  ?= /usr/local
BUILD   ?= build
PYTHON  ?= /usr/bin/python3

WERROR  ?= 0
WARN     = -Wall -Wextra -Wshadow -Wpointer-arith -Wstrict-prototypes -Wvla
ifeq ($(WERROR),1)
WARN    += -Werror
endif
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -fPIC $(WARN) $(CPPFLAGS) $(CFLAGS) -Ilib
LIBS_LIB = -lm -lpthread
LIBS_SRV = $(shell pkg-config --libs libmicrohttpd jansson 2>/dev/null || echo -lmicrohttpd -ljansson)
LIBS_CURL = $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl)

LIB_SRC  = $(wildcard lib/*.c)
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/%.o)
SRV_SRC  = $(filter-out server/main.c,$(wildcard server/*.c))
SRV_OBJ  = $(SRV_SRC:%.c=$(BUILD)/%.o)
# The server's wire codecs, which test_wire, test_body, bench_wire and
# fuzz-wire use without the rest of the server.
WIRE_OBJ = $(addprefix $(BUILD)/server/,scan.o codec.o numfmt.o buf.o b64.o body.o error.o tasks.o)

# The shared library is libattn.so.MAJOR (its SONAME), MAJOR read from
# lib/attn.h; build/libattn.so links to it.
VERSION := $(shell sed -n 's/^\#define ATTN_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' lib/attn.h | paste -sd.)
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
STATIC   = $(BUILD)/libattn.a
SHARED   = $(BUILD)/libattn.so.$(SOMAJOR)
SERVER   = $(BUILD)/attn-server

.PHONY: all lib server run test test-install test-bins bench-run build-matrix test-rows test-kernels test-lib test-ctx test-sparse-linear test-http test-sessions test-kserve test-browser test-docker bench asan fuzz fuzz-bins lint lint-openapi test-openapi clean install install-lib deps golden test-wire fuzz-wire test-fuzz-corpus valgrind test-load

all: lib server

lib: $(STATIC) $(SHARED)

server: $(SERVER)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# Hidden visibility: the shared library exports what lib/attn.h declares
# (its pragma) and nothing else.
$(LIB_OBJ): ALL_CFLAGS += -fvisibility=hidden

$(SHARED): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libattn.so.$(SOMAJOR) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)
	ln -sf libattn.so.$(SOMAJOR) $(BUILD)/libattn.so

$(SERVER): $(BUILD)/server/main.o $(SRV_OBJ) $(BUILD)/libmdl.a $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_SRV) $(LIBS_LIB)

# ------------------------------------------------------------------ tests

TEST_LIB  = $(BUILD)/test_lib
TEST_HTTP = $(BUILD)/test_http

$(TEST_LIB): $(BUILD)/tests/test_lib.o $(BUILD)/tests/ref.o $(BUILD)/tests/ref_modern.o $(BUILD)/tests/golden.o $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

HARNESS_OBJ = $(BUILD)/tests/harness.o $(BUILD)/tests/golden.o

$(TEST_HTTP): $(BUILD)/tests/test_http.o $(BUILD)/tests/ref_modern.o $(HARNESS_OBJ) $(SERVER)
	$(CC) -o $@ $(BUILD)/tests/test_http.o $(BUILD)/tests/ref_modern.o $(HARNESS_OBJ) $(LDFLAGS) $(LIBS_CURL) $(LIBS_SRV) $(LIBS_LIB)

$(BUILD)/tests/%.o: ALL_CFLAGS += -Itests

# The kernel test links only the kernel objects, so it runs even while the
# rest of lib/ is in progress.
TEST_KERNELS = $(BUILD)/test_kernels
KERN_OBJ = $(filter $(BUILD)/lib/kernels%.o $(BUILD)/lib/amx.o $(BUILD)/lib/pool.o,$(LIB_OBJ))

$(TEST_KERNELS): $(BUILD)/tests/test_kernels.o $(KERN_OBJ)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

# The default test run: every suite in order, then one closing line that adds
# up their `N passed, N failed` lines (tests/run.sh). Installs missing test
# packages first, as `make run` does for the server's.
TEST_SUITES = test-kernels test-rows test-lib test-ctx test-sparse-linear test-modern-ref test-modern test-wire test-http test-sessions test-kserve test-browser test-metrics test-examples test-install test-replicas test-models test-fuzz-corpus

test:
	@sh scripts/deps.sh test
	@tests/run.sh $(MAKE) $(TEST_SUITES)

test-kernels: $(TEST_KERNELS)
	$(TEST_KERNELS)

# The vectorised tanh, score, softmax and weighted-sum kernels of the
# additive / concat_tanh / concat rules against double references; --step
# thins the tanh sweep over the floats in [0, 20] against the README's bound
# (ROWS_STEP=1: every float, about 40 CPU-seconds per CPU variant).
TEST_ROWS = $(BUILD)/test_rows
ROWS_STEP ?= 97

$(TEST_ROWS): $(BUILD)/tests/test_rows.o $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

test-rows: $(TEST_ROWS)
	$(TEST_ROWS) --step $(ROWS_STEP)

test-lib: $(TEST_LIB)
	$(TEST_LIB) tests/golden --bad tests/lib/bad_requests.txt

# The execution contract (tests/test_ctx.c): the cost the plans report, no
# heap allocation after a context's first call of a shape (malloc and
# friends interposed and counted), concurrent contexts on threads.
TEST_CTX = $(BUILD)/test_ctx

$(TEST_CTX): $(BUILD)/tests/test_ctx.o $(BUILD)/tests/ref.o $(BUILD)/tests/ref_modern.o $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

test-ctx: $(TEST_CTX)
	$(TEST_CTX)

# Linear and sparse attention (tests/test_sparse_linear.c): their golden
# cases in tests/golden_modern/, random requests against the double
# reference tests/ref_modern.c on every instruction set and 1 and 2
# threads, and sparse against dense attention with the expanded mask.
TEST_SPARSE_LINEAR = $(BUILD)/test_sparse_linear

$(TEST_SPARSE_LINEAR): $(BUILD)/tests/test_sparse_linear.o $(BUILD)/tests/modern_case.o $(BUILD)/tests/ref_modern.o $(BUILD)/tests/golden.o $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

test-sparse-linear: $(TEST_SPARSE_LINEAR)
	$(TEST_SPARSE_LINEAR) tests/golden_modern

# The HTTP tests start the server themselves on free loopback ports; then,
# when Node is installed, every example in openapi.yaml is posted and each
# response validated against its declared schema (test-openapi).
test-http: $(TEST_HTTP) $(SERVER)
	$(TEST_HTTP) --server $(SERVER) --log $(BUILD)/test_http_server.log
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory test-openapi; \
	else echo "SKIPPED: test-openapi (node and npm are not installed)"; \
	     echo "0 passed, 0 failed, 1 skipped"; fi

# Decode sessions (server/sessions.c) against live servers: every step of
# random sessions against the double reference (tests/ref_modern.c) over the
# whole cache, limits, expiry, concurrency, the contract's errors.
TEST_SESSIONS = $(BUILD)/test_sessions

$(TEST_SESSIONS): $(BUILD)/tests/test_sessions.o $(BUILD)/tests/ref_modern.o $(HARNESS_OBJ)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_CURL) $(LIBS_SRV) $(LIBS_LIB)

test-sessions: $(TEST_SESSIONS) $(SERVER)
	$(TEST_SESSIONS) --server $(SERVER) --log $(BUILD)/test_sessions_server.log

# KServe v2 / Open Inference Protocol routes (server/kserve.c) against a
# live server: metadata, every golden vector as JSON and as binary tensor
# data requests, errors, and the README's curl and Python examples
# (tests/kserve/).
TEST_KSERVE = $(BUILD)/test_kserve

$(TEST_KSERVE): $(BUILD)/tests/test_kserve.o $(BUILD)/tests/ref_modern.o $(HARNESS_OBJ)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_CURL) $(LIBS_SRV) $(LIBS_LIB)

test-kserve: $(TEST_KSERVE) $(SERVER)
	$(TEST_KSERVE) --server $(SERVER) --golden tests/golden --cases tests/kserve --examples tests/kserve \
	    --log $(BUILD)/test_kserve_server.log

# Regenerates tests/golden/*.txt from PyTorch (Debian's python3-torch).
golden:
	$(PYTHON) tests/gen_golden.py tests/golden

# The demo (demo/) in Debian's headless chromium, driven by playwright-core and
# checked by axe-core (both pinned in tests/browser/package-lock.json), against a server on a free
# 127.0.0.1 port; screenshots land in tests/browser/screenshots/ (the trained
# models' views at 1280x800 and 390x844 in $(BUILD)/screenshots/).
BROWSER_NPM = tests/browser/node_modules/.package-lock.json

$(BROWSER_NPM): tests/browser/package.json tests/browser/package-lock.json
	cd tests/browser && npm ci --no-audit --no-fund --loglevel=error

test-browser: $(BROWSER_NPM) $(SERVER)
	tests/browser/run.sh $(SERVER)

# ------------------------------------------------------------------ shipping
# Each starts what it needs on free 127.0.0.1 ports and stops it again.

.PHONY: test-docker test-replicas test-metrics test-examples

# Builds the image and the nginx image, runs both with --network host and
# posts a request; starts dockerd and makes the Debian base image
# (debootstrap, cached in $(BUILD)/docker) when missing.
test-docker:
	tests/docker/test.sh $(BUILD)

# Three replicas behind nginx; one SIGTERMed, one SIGKILLed under load; zero
# failed client requests. Then decode sessions through nginx and three
# replicas: spread, pinned to their replica, 404 unknown_session after their
# replica is SIGKILLed (tests/replicas/sessions.sh).
test-replicas: $(SERVER)
	tests/replicas/test.sh $(SERVER) $(BUILD)
	tests/replicas/sessions.sh $(SERVER) $(BUILD)
	tests/replicas/lb_limits.sh $(SERVER) $(BUILD)

# promtool check metrics, counter values, and a real Prometheus scrape.
test-metrics: $(SERVER)
	tests/metrics.sh $(SERVER) $(BUILD)

# The Python, JavaScript (Node) and curl clients in examples/, and the
# README's library example checked against PyTorch.
$(BUILD)/lib_example: $(BUILD)/examples/lib_example.o $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

$(BUILD)/lib_decode: $(BUILD)/examples/lib_decode.o $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

$(BUILD)/lib_varlen: $(BUILD)/examples/lib_varlen.o $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

# The library installed alone and used through pkg-config (tests/install.sh).
test-install:
	tests/install.sh $(MAKE) $(BUILD)

test-examples: $(SERVER) $(BUILD)/lib_example $(BUILD)/lib_decode $(BUILD)/lib_varlen
	tests/examples.sh $(SERVER) $(BUILD)
	$(BUILD)/lib_example | $(PYTHON) examples/lib_example_check.py
	$(BUILD)/lib_decode | $(PYTHON) examples/lib_decode_check.py
	$(BUILD)/lib_varlen | $(PYTHON) examples/lib_varlen_check.py

# ------------------------------------------------------------------ bench

# One report: the machine's measured float32 FMA and bf16 peaks and what the
# library's exponential costs its multiply-add units (bench/peak.c),
# this library through its public calls (bench_kernels) beside ONNX Runtime
# through its C API (bench/ort_capi.c, dlopen'ing the CPU library the npm
# package onnxruntime-node ships; its install script is skipped), PyTorch
# (Debian python3-torch) and OpenBLAS sgemm (libopenblas-dev), with the
# issue's targets; bench/models.py writes ONNX Runtime's models (Debian
# python3-onnx). bench/run.py says what each column and target means. Then
# the trained models: their BLEU (training/results.json) and translation
# speed in C against PyTorch (bench/translate_bench.py, as make bench-models).
BENCH_KERNELS = $(BUILD)/bench_kernels
BENCH_PEAK    = $(BUILD)/peak
BENCH_ORT     = $(BUILD)/ort_capi
BENCH_OURS    = $(BUILD)/bench/ours.o
BENCH_NPM = bench/node_modules/onnxruntime-node/package.json

$(BENCH_KERNELS): $(BUILD)/bench/bench_kernels.o $(BENCH_OURS) $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) -lopenblas $(LIBS_LIB)

# bench_kernels on the library with every exponential of the softmax
# replaced by its argument (ATTN_BENCH_NO_EXP, lib/simd_math.h): wrong
# answers, timed by bench/run.py only to say what the exponentials cost the
# float32 core. Built in its own directory; nothing else links it.
BENCH_NOEXP = $(BUILD)/bench_kernels_noexp
NOEXP_OBJ = $(LIB_OBJ:$(BUILD)/lib/%=$(BUILD)/noexp/lib/%)

$(BUILD)/noexp/lib/%.o: lib/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DATTN_BENCH_NO_EXP -MMD -MP -c $< -o $@

$(BENCH_NOEXP): $(BUILD)/bench/bench_kernels.o $(BENCH_OURS) $(NOEXP_OBJ)
	$(CC) -o $@ $^ $(LDFLAGS) -lopenblas $(LIBS_LIB)

$(BENCH_PEAK): $(BUILD)/bench/peak.o
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

$(BENCH_ORT): $(BUILD)/bench/ort_capi.o $(BENCH_OURS) $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) -ldl $(LIBS_LIB)

$(BENCH_NPM): bench/package.json
	cd bench && npm install --ignore-scripts --no-audit --no-fund --loglevel=error

# What the score pipeline's options (softcap, ALiBi, rope, sinks) cost on the
# dense core and on a decode row, in CPU seconds (bench/modern.c).
BENCH_MODERN = $(BUILD)/bench_modern

$(BENCH_MODERN): $(BUILD)/bench/modern.o $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

.PHONY: bench-modern
bench-modern: $(BENCH_MODERN)
	$(BENCH_MODERN)

# Every path's time beside the library's estimate of its cost, the work
# cap's measure (bench/cost.c).
BENCH_COST = $(BUILD)/bench_cost

$(BENCH_COST): $(BUILD)/bench/cost.o $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

.PHONY: bench-cost
bench-cost: $(BENCH_COST)
	$(BENCH_COST)

# The wire and service rows: the server's codecs against Jansson on 1M floats
# (bench_wire links the wire objects), a base64 multi-head request to a live
# attn-server, and small requests by wrk against it and a bare libmicrohttpd
# server answering a fixed 200 (bare_mhd), all on free 127.0.0.1 ports.
BENCH_WIRE = $(BUILD)/bench_wire
BARE_MHD   = $(BUILD)/bare_mhd

$(BUILD)/bench/bench_wire.o: ALL_CFLAGS += -Iserver

$(BENCH_WIRE): $(BUILD)/bench/bench_wire.o $(WIRE_OBJ) $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_SRV) $(LIBS_LIB)

$(BARE_MHD): $(BUILD)/bench/bare_mhd.o
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_SRV) $(LIBS_LIB)

HTTP_BENCH = $(BUILD)/http_bench

$(HTTP_BENCH): $(BUILD)/bench/http_bench.o
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_CURL)

# Installs what the bench needs first (the test packages, OpenBLAS, ONNX and
# wrk), as make test does, then builds and runs it.
bench:
	@sh scripts/deps.sh bench
	@$(MAKE) --no-print-directory bench-run

bench-run: $(BENCH_KERNELS) $(BENCH_NOEXP) $(BENCH_PEAK) $(BENCH_ORT) $(BENCH_WIRE) $(BARE_MHD) $(HTTP_BENCH) $(SERVER) $(BENCH_NPM) $(BUILD)/bench_models
	@mkdir -p $(BUILD)/bench
	$(PYTHON) bench/models.py $(BUILD)/bench || echo "make bench: no ONNX models (Debian's python3-onnx missing?); the ONNX Runtime figures will be skipped"
	$(PYTHON) bench/run.py --build $(BUILD)
	@echo; echo "Fidelity: float32 and bf16 against a float64 truth, beside PyTorch's own (bench/bf16_error.py)"; echo
	$(PYTHON) bench/bf16_error.py --server $(SERVER) $(BUILD)/bench/bf16_error.json
	@echo; echo "Trained models: quality (training/results.json, from training/evaluate.py)"; echo
	$(PYTHON) training/report.py
	$(PYTHON) bench/translate_bench.py $(BUILD)

# ------------------------------------------------------------------ run

deps:
	@sh scripts/deps.sh

run: deps
	$(MAKE) server
	$(SERVER)

# The service's wire codecs (float text, base64, the big-array scanner)
# against printf/strtof, RFC 4648 and Jansson; and a libFuzzer target.
TEST_WIRE = $(BUILD)/test_wire
TEST_BODY = $(BUILD)/test_body
FUZZ_SECONDS ?= 60

$(BUILD)/server/selftest/%.o: ALL_CFLAGS += -Iserver

$(TEST_WIRE): $(BUILD)/server/selftest/test_wire.o $(WIRE_OBJ) $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_SRV) $(LIBS_LIB)

# A body decoded as its chunks come (server/body.c) against the codec's own
# decoding of the whole text, over random bodies, splits and breakages.
$(TEST_BODY): $(BUILD)/server/selftest/test_body.o $(WIRE_OBJ) $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_SRV) $(LIBS_LIB)

test-wire: $(TEST_WIRE) $(TEST_BODY)
	$(TEST_WIRE)
	$(TEST_BODY)

fuzz-wire: $(STATIC)
	@mkdir -p build-fuzz
	clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -Ilib -Iserver \
	    server/selftest/fuzz_wire.c $(patsubst $(BUILD)/%.o,%.c,$(WIRE_OBJ)) $(STATIC) \
	    -o build-fuzz/fuzz_wire $(LIBS_SRV) $(LIBS_LIB)
	build-fuzz/fuzz_wire -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=0

# ------------------------------------------------------------------ fuzzing
# libFuzzer targets in tests/fuzz/ (clang, Debian's libfuzzer-14-dev): tensor
# decoding in every form, base64, and the whole request handler in process for
# every route. Library and server are rebuilt under ASan + UBSan in
# build-fuzz/. `make fuzz` runs each for FUZZ_SECONDS (new inputs land in
# build-fuzz/corpus/, crashes in build-fuzz/crashes/); a crash becomes a
# regression case by copying it into tests/fuzz/corpus/<target>/, which
# `make test-fuzz-corpus` replays without fuzzing.
FUZZ_BUILD   = build-fuzz
FUZZ_TARGETS = tensor b64 request
FUZZ_BINS    = $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
FUZZ_CFLAGS  = -std=c11 -D_GNU_SOURCE $(WARN) -g -O1 -fno-omit-frame-pointer \
               -fsanitize=address,undefined -fno-sanitize-recover=undefined -Ilib -Iserver -Imodels
FUZZ_OBJ     = $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o) $(SRV_SRC:%.c=$(FUZZ_BUILD)/%.o) \
               $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(wildcard models/*.c))

# The SIMD kernel files are built plainly (-O2, no sanitizer, no coverage):
# the fuzzed inputs cannot steer their branches, make asan runs them under
# ASan and UBSan, and instrumented clang took over ten CPU-minutes and 4 GB
# on one of them. Everything else has coverage feedback and both sanitizers.
FUZZ_COV = -fsanitize=fuzzer-no-link
# Kept after linking (make deletes a pattern rule's intermediate objects,
# and every later make fuzz or test-fuzz-corpus then built them all again).
.SECONDARY: $(FUZZ_OBJ)
$(FUZZ_BUILD)/lib/kernels_%.o: lib/kernels_%.c
	@mkdir -p $(dir $@)
	clang -std=c11 -D_GNU_SOURCE $(WARN) -g -O2 -Ilib -MMD -MP -c $< -o $@
$(FUZZ_BUILD)/lib/%.o: lib/%.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) $(FUZZ_COV) -MMD -MP -c $< -o $@
$(FUZZ_BUILD)/server/%.o: server/%.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) $(FUZZ_COV) -MMD -MP -c $< -o $@
$(FUZZ_BUILD)/models/%.o: models/%.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) $(FUZZ_COV) -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_OBJ)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) $(LIBS_SRV) $(LIBS_LIB)

fuzz-bins: $(FUZZ_BINS)

# The fuzzer's output is filtered to its summary, but its exit status is
# kept (pipefail): a crash, leak, timeout or out-of-memory fails make fuzz.
fuzz: SHELL := /bin/bash
fuzz: $(FUZZ_BINS)
	@set -o pipefail; for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/crashes; \
		echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
		$(FUZZ_BUILD)/fuzz_$$t $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t \
		    -dict=tests/fuzz/json.dict -max_total_time=$(FUZZ_SECONDS) -max_len=16384 \
		    -timeout=10 -rss_limit_mb=2048 -artifact_prefix=$(FUZZ_BUILD)/crashes/$$t- \
		    -print_final_stats=1 2>&1 | { grep -E '^(stat::number_of_executed_units|stat::peak_rss|==|SUMMARY|#[0-9]+.*DONE)|ERROR|crash' || true; }; \
		rc=$$?; \
		test "$$rc" = 0 || { echo "fuzz_$$t: the fuzzer exited with status $$rc"; exit 1; }; \
		test -z "$$(ls $(FUZZ_BUILD)/crashes/$$t-* 2>/dev/null)" || { echo "fuzz_$$t: crash in $(FUZZ_BUILD)/crashes"; exit 1; }; \
	done
	$(MAKE) --no-print-directory fuzz-wire

# Every checked-in corpus file (seeds and past crashes) through its target
# once: a regression test, seconds long. Skipped without clang.
test-fuzz-corpus:
	@if ! command -v clang >/dev/null 2>&1; then \
		echo "SKIPPED: test-fuzz-corpus (no clang)"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi; \
	$(MAKE) --no-print-directory $(FUZZ_BINS) >/dev/null || exit 1; \
	pass=0; fail=0; \
	for t in $(FUZZ_TARGETS); do \
		n=$$(ls tests/fuzz/corpus/$$t | wc -l); \
		if $(FUZZ_BUILD)/fuzz_$$t tests/fuzz/corpus/$$t/* >$(FUZZ_BUILD)/replay_$$t.log 2>&1; then \
			pass=$$((pass + n)); echo "fuzz_$$t: $$n corpus inputs replayed"; \
		else fail=$$((fail + 1)); tail -30 $(FUZZ_BUILD)/replay_$$t.log; fi; \
	done; \
	echo "$$pass passed, $$fail failed"; test $$fail = 0

-include $(wildcard $(FUZZ_BUILD)/*/*.d)

# ------------------------------------------------------------------ checks

# A bounded load run (tests/load/run.sh; not part of `make test`): 64 loopback
# connections of mixed small and large requests with wrk for LOAD_SECONDS
# (120) after LOAD_WARMUP (30); no errors but deliberate 503s, resident
# memory growth after warm-up < 10%, p50/p99 latency printed.
test-load: $(SERVER)
	tests/load/run.sh $(SERVER) $(BUILD)

# The library tests (200 random trials) and every HTTP case file against
# servers run under valgrind memcheck (tests/valgrind/): any memory error or
# leak fails. Suppressions, with the reason for each, in tests/valgrind/attn.supp.
valgrind: $(TEST_LIB) $(TEST_KERNELS) $(TEST_HTTP) $(TEST_SESSIONS) $(SERVER)
	tests/valgrind/run.sh $(BUILD)

# The suites that run our C code built with clang's AddressSanitizer and
# UBSan: all of make test's but the browser, Prometheus and examples suites,
# whose requests test-http, test-sessions and test-kserve already make, and
# test-install, which links the library into programs built with cc
# (ASAN_SUITES="$(TEST_SUITES)" runs every one). The binaries first,
# ASAN_JOBS at a time; the suites then run one by one, with locals kept
# in ASan's own frames so that a pointer to a returned function's local
# is caught when read (detect_stack_use_after_return: off by default).
ASAN_JOBS ?= 2
ASAN_SUITES ?= $(filter-out test-browser test-metrics test-examples test-install,$(TEST_SUITES))
ASAN_MAKE = $(MAKE) BUILD=build-asan CC=clang WERROR=1 LDFLAGS="-fsanitize=address,undefined" \
	CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"

asan:
	$(ASAN_MAKE) -j$(ASAN_JOBS) test-bins
	ASAN_OPTIONS="detect_stack_use_after_return=1$${ASAN_OPTIONS:+:$$ASAN_OPTIONS}" \
		$(ASAN_MAKE) TEST_SUITES="$(ASAN_SUITES)" test

# openapi.yaml is linted with @redocly/cli, pinned in tests/openapi/package-lock.json.
OPENAPI_NPM = tests/openapi/node_modules/.package-lock.json

$(OPENAPI_NPM): tests/openapi/package.json tests/openapi/package-lock.json
	cd tests/openapi && npm ci --no-audit --no-fund --loglevel=error

lint-openapi: $(OPENAPI_NPM)
	tests/openapi/node_modules/.bin/redocly lint openapi.yaml

# Posts every example in openapi.yaml to a fresh server (run by test-http).
test-openapi: $(OPENAPI_NPM) $(SERVER)
	node tests/openapi/check_examples.mjs --bin $(SERVER)

lint: lint-openapi
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability --std=c11 -Ilib lib server
	$(PYTHON) -m pyflakes $$(git ls-files '*.py' 2>/dev/null || find . -name '*.py' -not -path '*/node_modules/*')

# The library, server, tests and benchmarks built with gcc and clang at -O0,
# -O1, -O2, -O3 and -Os, warnings as errors (tests/build_matrix.sh; each in
# build-matrix/CC-LEVEL). Not part of make test: ten builds take minutes.
build-matrix:
	tests/build_matrix.sh $(MAKE)

clean:
	rm -rf build build-asan build-fuzz build-valgrind build-matrix

# The library alone (no server, so no libmicrohttpd or Jansson needed):
# both libraries, the header and a pkg-config file (attn.pc).
install-lib: lib
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib
	install -m 755 $(SHARED) $(DESTDIR)$(PREFIX)/lib
	ln -sf libattn.so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/libattn.so
	install -m 644 lib/attn.h $(DESTDIR)$(PREFIX)/include
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' lib/attn.pc.in \
		>$(DESTDIR)$(PREFIX)/lib/pkgconfig/attn.pc

install: install-lib server
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(SERVER) $(DESTDIR)$(PREFIX)/bin

# Only our object folders: build/ also holds a Debian root file system
# (test-docker), whose rc?.d folders a wider pattern would include.
-include $(wildcard $(BUILD)/*/*.d $(BUILD)/server/*/*.d $(BUILD)/tests/*/*.d $(BUILD)/noexp/lib/*.d)

# ------------------------------------------------------------------ modern attention
# The double-precision C reference of the modern options (tests/ref_modern.c:
# softcap, ALiBi, sinks, alignment, window pairs, rope, hard sampling, sparse
# patterns, learned positions, linear attention) against the PyTorch vectors
# in tests/golden_modern/, which `make golden-modern` regenerates: the two
# references agree before test-modern holds lib/ to both (about two seconds).
TEST_MODERN_REF = $(BUILD)/test_modern_ref

$(TEST_MODERN_REF): $(BUILD)/tests/test_modern_ref.o $(BUILD)/tests/modern_case.o $(BUILD)/tests/ref_modern.o $(BUILD)/tests/golden.o
	$(CC) -o $@ $^ $(LDFLAGS) -lm

.PHONY: test-modern-ref golden-modern test-modern

# The library's modern options (tests/test_modern.c) against those vectors
# and against tests/ref_modern.c over random requests, on every CPU variant.
TEST_MODERN = $(BUILD)/test_modern

$(TEST_MODERN): $(BUILD)/tests/test_modern.o $(BUILD)/tests/modern_case.o $(BUILD)/tests/ref_modern.o $(BUILD)/tests/golden.o $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

test-modern: $(TEST_MODERN)
	$(TEST_MODERN) tests/golden_modern

test-modern-ref: $(TEST_MODERN_REF)
	$(TEST_MODERN_REF) tests/golden_modern

golden-modern:
	$(PYTHON) tests/gen_modern.py tests/golden_modern

# ---- trained English->French attention models (see training/README.md) ----
# Needs Debian's python3 with torch (not the pyenv one) and root for apt-get.
# corpus -> tokenizer -> train (Transformer and the three GRUs in parallel,
# one thread each; the Transformer a wall-clock budget in minutes, the GRUs
# GRU_STEPS steps each, two running at a time, GRU_MINUTES a cap) -> evaluate.
# It repeats only the first run of each model (the shipped weights come from
# longer chains of runs, training/README.md) and writes over training/data,
# the BPE files, weights, logs, outputs and results.json in place, so it asks
# for MODELS_OVERWRITE=1 (git checkout training/ brings the shipped ones back).
.PHONY: models models-smoke
TORCH_PY ?= /usr/bin/python3
TRANSFORMER_MINUTES ?= 92
GRU_STEPS ?= 2600
GRU_MINUTES ?= 47
models:
	@if [ "$(MODELS_OVERWRITE)" != 1 ]; then \
	  echo "make models: retrains the first run of each model only, writing over the shipped training/data," \
	       "BPE files, weights, logs, outputs and results.json; run make models MODELS_OVERWRITE=1 to do it" >&2; \
	  exit 2; fi
	$(TORCH_PY) training/corpus.py --install
	$(TORCH_PY) training/tokenizer.py --vocab-size 3600
	$(TORCH_PY) training/tokenizer.py --selftest
	$(TORCH_PY) training/bleu.py --selftest
	mkdir -p training/logs training/weights
	$(TORCH_PY) training/train.py --model transformer --minutes $(TRANSFORMER_MINUTES) > training/logs/transformer.log 2>&1 & \
	  training/run_gru.sh $(GRU_STEPS) $(GRU_MINUTES); wait
	$(TORCH_PY) training/evaluate.py

models-smoke:
	$(TORCH_PY) training/bleu.py --selftest
	$(TORCH_PY) training/tokenizer.py --selftest
	for m in transformer concat additive general; do $(TORCH_PY) training/train.py --model $$m --smoke || exit 1; done
	$(TORCH_PY) training/train.py --model general --smoke --general-scaled

# ---- the trained models in C (models/, models/mdl.h) ----
# test-models: the C models against PyTorch (tests/models_ref.py prepare
# writes the tokenisation, teacher-forced attention and, without shipped
# weights, random weights with a fresh token reference, in seconds), the
# weight-file checks, and the HTTP routes. models-ref regenerates the
# checked-in greedy/beam-4 token reference (tests/models_ref/) after new
# weights land (minutes).
MDL_SRC  = $(wildcard models/*.c)
MDL_OBJ  = $(MDL_SRC:%.c=$(BUILD)/%.o)
MDL_LIB  = $(BUILD)/libmdl.a
TEST_MODELS = $(BUILD)/test_models
MODELS_N ?= 300
MODELS_ATTN ?= 100
MODELS_REF_N ?= 2000

# models/ is built at -O3 over the default CFLAGS. A CFLAGS given on the
# command line or in the environment holds for models/ too (make CFLAGS="-O0
# -g" debugs them); MODELS_OPT, appended after CFLAGS, may be set either way.
ifeq ($(origin CFLAGS),file)
MODELS_OPT ?= -O3
endif
$(BUILD)/models/%.o: ALL_CFLAGS += $(MODELS_OPT)
$(BUILD)/tests/test_models.o $(BUILD)/bench/bench_models.o $(BUILD)/server/models_routes.o: ALL_CFLAGS += -Imodels

$(MDL_LIB): $(MDL_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(TEST_MODELS): $(BUILD)/tests/test_models.o $(MDL_LIB) $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_CURL) $(LIBS_SRV) $(LIBS_LIB)

.PHONY: test-models test-models-full models-ref bench-models test-models-smoke
test-models: $(TEST_MODELS) $(SERVER)
	$(PYTHON) tests/models_ref.py prepare $(BUILD)/models_ref --n-attn $(MODELS_ATTN)
	$(PYTHON) training/totals.py --check > /dev/null
	$(TEST_MODELS) --ref $(BUILD)/models_ref --n $(MODELS_N) --server $(SERVER) --log $(BUILD)/test_models_server.log

# Every sentence of the reference (MODELS_REF_N, up to the whole test split).
test-models-full: $(TEST_MODELS) $(SERVER)
	$(MAKE) --no-print-directory test-models MODELS_N=2000 MODELS_ATTN=2000

# Greedy and beam-4 translation of a ~10-word sentence, C against the
# PyTorch definition, one thread each (bench/translate_bench.py).
BENCH_MODELS = $(BUILD)/bench_models

$(BENCH_MODELS): $(BUILD)/bench/bench_models.o $(MDL_LIB) $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_SRV) $(LIBS_LIB)

bench-models: $(BENCH_MODELS)
	$(PYTHON) bench/translate_bench.py $(BUILD) $(if $(MODELS_DIR),--weights $(MODELS_DIR))

# The four models in parallel processes (minutes for 2000 sentences).
models-ref:
	for m in concat additive general transformer; do \
	  $(PYTHON) tests/models_ref.py decode training/weights tests/models_ref --n $(MODELS_REF_N) --models $$m & \
	done; wait

# training/train.py --smoke for the four models (make models-smoke): ~40 s on
# a loaded machine, so not in `make test`.
test-models-smoke: models-smoke

# ------------------------------------------------------------------ test-bins
# Every program make test compiles, and the benchmarks' C programs, without
# running any (make build-matrix, make asan). Last in the file because make
# expands a rule's prerequisites as it reads the rule: every name is set by then.
test-bins: all $(TEST_KERNELS) $(TEST_ROWS) $(TEST_LIB) $(TEST_CTX) $(TEST_SPARSE_LINEAR) \
           $(TEST_MODERN_REF) $(TEST_MODERN) $(TEST_HTTP) $(TEST_SESSIONS) $(TEST_KSERVE) \
           $(TEST_WIRE) $(TEST_BODY) $(TEST_MODELS) $(BUILD)/lib_example $(BUILD)/lib_decode $(BUILD)/lib_varlen \
           $(BENCH_KERNELS) $(BENCH_PEAK) $(BENCH_ORT) $(BENCH_MODERN) $(BENCH_WIRE) $(BARE_MHD) \
           $(HTTP_BENCH) $(BENCH_MODELS)
