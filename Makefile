# Makefile - builds the attention library, the service and their tests.
#
#   make            library (static and shared) and the server binary
#   make run        install missing Debian packages, build, serve on 127.0.0.1:8080
#   make test       library tests, then HTTP integration tests against a live server
#   make bench      kernel and wire benchmarks beside ONNX Runtime, PyTorch, OpenBLAS
#   make asan       the tests under AddressSanitizer + UBSan
#   make fuzz       libFuzzer targets (FUZZ_SECONDS each)
#   make lint       cppcheck over lib/ and server/, redocly over openapi.yaml
#   make clean
#
# CC, CFLAGS, LDFLAGS and PREFIX may be overridden. Objects carry automatic
# header dependencies (-MMD). Architecture-specific kernels choose their
# instruction set at run time (function target attributes), so the default
# build runs on any x86-64 or non-x86 CPU.

CC      ?= cc
CFLAGS  ?= -O2 -g
PREFIX  ?= /usr/local
BUILD   ?= build
PYTHON  ?= /usr/bin/python3

WARN     = -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes -Wvla
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -fPIC $(WARN) $(CFLAGS) -Ilib
LIBS_LIB = -lm -lpthread
LIBS_SRV = $(shell pkg-config --libs libmicrohttpd jansson 2>/dev/null || echo -lmicrohttpd -ljansson)
LIBS_CURL = $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl)

LIB_SRC  = $(wildcard lib/*.c)
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/%.o)
SRV_SRC  = $(filter-out server/main.c,$(wildcard server/*.c))
SRV_OBJ  = $(SRV_SRC:%.c=$(BUILD)/%.o)

STATIC   = $(BUILD)/libattn.a
SHARED   = $(BUILD)/libattn.so
SERVER   = $(BUILD)/attn-server

.PHONY: all lib server run test test-lib test-http test-browser test-docker bench asan fuzz lint clean install deps golden

all: lib server

lib: $(STATIC) $(SHARED)

server: $(SERVER)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(SHARED): $(LIB_OBJ)
	$(CC) -shared -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

$(SERVER): $(BUILD)/server/main.o $(SRV_OBJ) $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_SRV) $(LIBS_LIB)

# ------------------------------------------------------------------ tests

TEST_LIB  = $(BUILD)/test_lib
TEST_HTTP = $(BUILD)/test_http

$(TEST_LIB): $(BUILD)/tests/test_lib.o $(BUILD)/tests/ref.o $(BUILD)/tests/golden.o $(STATIC)
	$(CC) -o $@ $^ $(LDFLAGS) $(LIBS_LIB)

$(TEST_HTTP): $(BUILD)/tests/test_http.o $(BUILD)/tests/golden.o $(SERVER)
	$(CC) -o $@ $(BUILD)/tests/test_http.o $(BUILD)/tests/golden.o $(LDFLAGS) $(LIBS_CURL) $(LIBS_SRV) $(LIBS_LIB)

$(BUILD)/tests/%.o: ALL_CFLAGS += -Itests

test: test-lib test-http

test-lib: $(TEST_LIB)
	$(TEST_LIB) tests/golden

test-http: $(TEST_HTTP) $(SERVER)
	$(TEST_HTTP) --server $(SERVER)

# Regenerates tests/golden/*.txt from PyTorch (Debian's python3-torch).
golden:
	$(PYTHON) tests/gen_golden.py tests/golden

# ------------------------------------------------------------------ run

deps:
	@sh scripts/deps.sh

run: deps
	$(MAKE) server
	$(SERVER)

# ------------------------------------------------------------------ checks

asan:
	$(MAKE) BUILD=build-asan CC=clang CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" LDFLAGS="-fsanitize=address,undefined" test

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability --std=c11 -Ilib lib server

clean:
	rm -rf build build-asan build-fuzz

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(STATIC) $(SHARED) $(DESTDIR)$(PREFIX)/lib
	install -m 644 lib/attn.h $(DESTDIR)$(PREFIX)/include
	install -m 755 $(SERVER) $(DESTDIR)$(PREFIX)/bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
