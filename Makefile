# promptscore — plain Makefile.
#   make            the library (build/libpromptscore.a) and the CLI (build/promptscore)
#   make test       builds and runs every test (tests/test_*.c, then the script tests)
#   make check      the same suite rebuilt with AddressSanitizer + UBSan (in build-san/)
#   make bench      kernel benchmarks (validate first, then time; `make test` runs their --check)
# SIMD kernels use per-function target attributes, so the binary runs on any x86-64 and picks
# AVX2 / AVX-512 paths at run time.

CC      ?= cc
BUILD   ?= build
PKGS    := openblas libpcre2-8 libmicrohttpd jansson libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))

OPT     ?= -O2 -g
CFLAGS  := $(OPT) -std=c11 -Wall -Wextra -Werror -Wno-unused-parameter -D_GNU_SOURCE -pthread \
           -Iinclude -Isrc $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS  := $(PKG_LIBS) -lm -pthread
LDFLAGS := $(EXTRA_LDFLAGS)

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif

LIB_SRC := $(filter-out src/cli%.c,$(wildcard src/*.c))
CLI_SRC := $(wildcard src/cli*.c)
LIB_OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRC))
CLI_OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CLI_SRC))
# The web page (web/index.html) is compiled into the library as a C array: tools/embed.c
# writes $(BUILD)/gen/page.c, whose object joins the library (src/page.h declares it).
PAGE_C   := $(BUILD)/gen/page.c
PAGE_OBJ := $(BUILD)/gen/page.o
EMBED    := $(BUILD)/tools/embed
LIB     := $(BUILD)/libpromptscore.a
BIN     := $(BUILD)/promptscore

TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
# tests/load/*.c: standalone clients for a running server (tests/test_load.sh drives them)
LOAD_SRC  := $(wildcard tests/load/*.c)
LOAD_BIN  := $(patsubst tests/load/%.c,$(BUILD)/load/%,$(LOAD_SRC))
FUZZ_SRC  := $(wildcard fuzz/fuzz_*.c)
FUZZ_REPLAY := $(patsubst fuzz/%.c,$(BUILD)/fuzz/%_replay,$(FUZZ_SRC))

.PHONY: all test check bench fuzz clean demo
all: $(LIB) $(BIN)

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*.h) include/promptscore.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(EMBED): tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -std=c11 -Wall -Wextra -Werror -o $@ $<

$(PAGE_C): web/index.html $(EMBED)
	@mkdir -p $(dir $@)
	$(EMBED) ps_page_html web/index.html $@

$(PAGE_OBJ): $(PAGE_C) src/page.h
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ) $(PAGE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/check.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c tests/check.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/load/%: tests/load/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LDLIBS)

# Every fuzz target also builds with a plain main() that replays its corpus (fuzz/replay.c),
# so `make test` catches regressions without clang's libFuzzer.
$(BUILD)/fuzz/%_replay: fuzz/%.c fuzz/replay.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< fuzz/replay.c $(LIB) $(LDLIBS)

# tests/run.sh also runs every benchmark's --check (fast kernels against their references on
# small shapes, no timing) and reports the fuzz corpus replays on their own line.
test: all $(TEST_BIN) $(BENCH_BIN) $(LOAD_BIN) $(FUZZ_REPLAY)
	@BUILD=$(BUILD) sh tests/run.sh

# make check: every finding is fatal (-fno-sanitize-recover=all); LeakSanitizer runs at each
# test's exit; strict_string_checks flags string functions reading past an unterminated buffer.
# tests/test_valgrind.sh, test_slurm.sh and test_nginx.sh are not run here (PS_SANITIZED): they run on
# the plain build (valgrind and ASan do not mix; the cluster tests exercise code test_shard.sh and
# test_server cover here).
check:
	ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:check_initialization_order=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 PS_SANITIZED=1 \
	$(MAKE) BUILD=build-san SAN=1 OPT="-O1 -g" test

# make demo: builds, then scores examples/prompts.jsonl with a model it finds or makes
# (tools/demo.sh says which: ../shared's stories260K, the -hf cache / download, or a random one)
demo: all
	@BUILD=$(BUILD) sh tools/demo.sh

bench: all $(BENCH_BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done

fuzz:
	sh fuzz/build.sh

clean:
	rm -rf build build-san build-fuzz
