# promptscore — plain Makefile.
#   make            the core library (build/libpromptscore.a, build/libpromptscore.so.N), the
#                   front ends beside it (build/libpromptscore-front.a) and the CLI
#                   (build/promptscore)
#   make test       builds and runs the test suite (tests/test_*.c, the script tests, the
#                   benchmarks' --check, the fuzz corpora), PS_JOBS tests at once (default:
#                   nproc; PS_JOBS=1 runs them one after another; -j2 builds in parallel),
#                   each test's output in $(BUILD)/test-logs/NAME.log (tests/run.sh); its
#                   time: docs/figures.md. make BENCH_PKGS=none test: as without OpenBLAS.
#                   Tests, benchmarks and fuzz replays link a test build (-DPS_TESTING,
#                   $(BUILD)/tobj, libpromptscore-test.a, build/tests/promptscore-t) that has
#                   the hooks of src/base/testhooks.h; the shipped binary and libraries do not
#   make check      the longer suites: valgrind, the daemons (nginx, Slurm) and the browsers
#                   (page, openai client) on the plain build (make test-extra), then the test
#                   suite rebuilt with AddressSanitizer + UBSan (in build-san/), then TSan
#   make bench      kernel benchmarks (validate first, then time; `make test` runs their --check)
#   make install    PREFIX=/usr/local (and DESTDIR): bin/promptscore, include/promptscore.h,
#                   lib/libpromptscore.{a,so,so.N}, lib/pkgconfig/promptscore.pc
# SIMD kernels use per-function target attributes, so the binary runs on any x86-64 and picks
# AVX2 / AVX-512 paths at run time.

CC      ?= cc
BUILD   ?= build
# The core needs PCRE2 only (plus libm and pthreads); the front ends add microhttpd, jansson,
# curl and zlib (the zlib ratio of --detect); OpenBLAS is the baseline of one benchmark
# (bench_matmul) and nothing else.
CORE_PKGS  := libpcre2-8
FRONT_PKGS := libmicrohttpd jansson libcurl zlib
BENCH_PKGS := openblas
PKG_CFLAGS := $(shell pkg-config --cflags $(CORE_PKGS) $(FRONT_PKGS))
CORE_LIBS  := $(shell pkg-config --libs $(CORE_PKGS)) -lm -pthread
PKG_LIBS   := $(shell pkg-config --libs $(CORE_PKGS) $(FRONT_PKGS))
# (quietly: plain `make` and `make demo` do not need it; `sh tools/setup.sh --test` installs it).
# Without it bench_matmul is built without its cblas_sgemm baseline and says so, and `make test`
# prints a note naming the package; `make BENCH_PKGS=none test` shows that build.
HAVE_OPENBLAS := $(shell pkg-config --exists $(BENCH_PKGS) 2>/dev/null && echo 1)
ifeq ($(HAVE_OPENBLAS),1)
BENCH_LIBS := $(shell pkg-config --libs $(BENCH_PKGS))
BENCH_CFLAGS := $(shell pkg-config --cflags $(BENCH_PKGS)) -DPS_HAVE_OPENBLAS
endif

# Every object is position-independent (one set serves the static and the shared library) and
# hidden unless the public header marks it PS_API, so the shared library exports exactly the
# functions of include/promptscore.h.
# Every compile writes its header dependencies beside its output (-MMD -MP: a .d file, read
# back below), so a changed header rebuilds exactly the objects and programs that include it.
OPT     ?= -O2 -g
WARN    := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wmissing-prototypes \
           -Wstrict-prototypes -Wformat=2 -Wcast-qual
CFLAGS  := $(OPT) -std=c11 $(WARN) -D_GNU_SOURCE -pthread -MMD -MP \
           -fPIC -fvisibility=hidden -Iinclude -Isrc $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS  := $(PKG_LIBS) -lm -pthread
LDFLAGS := $(EXTRA_LDFLAGS)

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(SAN),thread)
CFLAGS  += -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS += -fsanitize=thread
endif

# The layering (docs/layout.md; tests/test_layers.sh enforces it): src/ holds one folder per
# layer, lowest first: base gguf kernels model run score | front | serve gen | cli. The core library
# (libpromptscore: what make install ships) is the first six folders; front/, serve/ and gen/ are the
# front ends (libmicrohttpd, jansson, libcurl, the model generator), which only the CLI and the
# tests link; cli/ is the promptscore binary. A new file joins the layer of the folder it is in.
CORE_DIRS  := base gguf kernels model run score
FRONT_DIRS := front serve gen
CORE_SRC  := $(foreach d,$(CORE_DIRS),$(wildcard src/$(d)/*.c))
FRONT_SRC := $(foreach d,$(FRONT_DIRS),$(wildcard src/$(d)/*.c))
CLI_SRC   := $(wildcard src/cli/*.c)
CORE_OBJ  := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CORE_SRC))
FRONT_OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(FRONT_SRC))
CLI_OBJ   := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CLI_SRC))
# The web page (web/index.html) is compiled into the front ends as a C array: tools/embed.c
# writes $(BUILD)/gen/page.c, whose object joins libpromptscore-front.a (src/serve/page.h declares it).
PAGE_C   := $(BUILD)/gen/page.c
PAGE_OBJ := $(BUILD)/gen/page.o
EMBED    := $(BUILD)/tools/embed
VERSION  := $(shell sed -n 's/^\#define PS_VERSION_STRING "\(.*\)"/\1/p' include/promptscore.h)
SOVER    := $(firstword $(subst ., ,$(VERSION)))
LIB      := $(BUILD)/libpromptscore.a
SONAME   := libpromptscore.so.$(SOVER)
SO       := $(BUILD)/libpromptscore.so.$(VERSION)
FRONT    := $(BUILD)/libpromptscore-front.a
BIN      := $(BUILD)/promptscore
# What the CLI links: the front ends, then the core (static, so it also reaches the internal
# functions the shared library hides).
LINK_LIBS := $(FRONT) $(LIB)
# Test builds (base/testhooks.h; as SQLite's SQLITE_TEST): the same sources compiled again with
# -DPS_TESTING into $(BUILD)/tobj, which adds the test hooks (allocation-failure injection, the
# PS_TEST_HOLD_FDS hold, the moe reference switch). They make one archive, core and front ends
# together, that the test binaries, the benchmarks and the fuzz replays link, and
# $(BUILD)/tests/promptscore-t, the CLI built from them, which the tests that need a hook in a
# running server start. build/promptscore, libpromptscore.a and the shared library are built
# from $(BUILD)/obj, without PS_TESTING, and carry no hook.
TEST_CFLAGS := $(CFLAGS) -DPS_TESTING
TCORE_OBJ := $(patsubst src/%.c,$(BUILD)/tobj/%.o,$(CORE_SRC))
TFRONT_OBJ := $(patsubst src/%.c,$(BUILD)/tobj/%.o,$(FRONT_SRC))
TCLI_OBJ  := $(patsubst src/%.c,$(BUILD)/tobj/%.o,$(CLI_SRC))
TLIB      := $(BUILD)/libpromptscore-test.a
TBIN      := $(BUILD)/tests/promptscore-t

PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include

TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
# tests/load/*.c: standalone clients for a running server (tests/test_load.sh drives them)
LOAD_SRC  := $(wildcard tests/load/*.c)
LOAD_BIN  := $(patsubst tests/load/%.c,$(BUILD)/load/%,$(LOAD_SRC))
FUZZ_SRC  := $(wildcard fuzz/fuzz_*.c)
FUZZ_REPLAY := $(patsubst fuzz/%.c,$(BUILD)/fuzz/%_replay,$(FUZZ_SRC))
FUZZ_OBJ  := $(patsubst fuzz/%.c,$(BUILD)/fuzz/%.o,$(FUZZ_SRC)) $(BUILD)/fuzz/replay.o
# the header dependencies of everything above (-MMD -MP), once it has been built
DEPS := $(wildcard $(patsubst %.o,%.d,$(CORE_OBJ) $(FRONT_OBJ) $(CLI_OBJ) $(TCORE_OBJ) \
          $(TFRONT_OBJ) $(TCLI_OBJ) $(PAGE_OBJ) $(FUZZ_OBJ)) \
          $(addsuffix .d,$(TEST_BIN) $(BENCH_BIN) $(LOAD_BIN)))

.PHONY: all test test-extra check tsan bench fuzz clean demo install binaries
all: $(LIB) $(SO) $(FRONT) $(BIN)

$(BUILD)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/tobj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -c $< -o $@

$(EMBED): tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -std=c11 $(WARN) -o $@ $<

$(PAGE_C): web/index.html $(EMBED)
	@mkdir -p $(dir $@)
	$(EMBED) ps_page_html web/index.html $@

$(PAGE_OBJ): $(PAGE_C)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared core: links against PCRE2, libm and pthreads only (--no-undefined: a core file
# that calls into a front end or another library fails here, not in a user's link).
$(SO): $(CORE_OBJ)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined -o $@ $^ $(CORE_LIBS)
	ln -sf $(notdir $@) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/libpromptscore.so

$(FRONT): $(FRONT_OBJ) $(PAGE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LINK_LIBS)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LINK_LIBS) $(LDLIBS)

# the test build: one archive of the PS_TESTING objects (the core, the front ends, the page)
$(TLIB): $(TCORE_OBJ) $(TFRONT_OBJ) $(PAGE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(TBIN): $(TCLI_OBJ) $(TLIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(TCLI_OBJ) $(TLIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TLIB)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $(LDFLAGS) -o $@ $< $(TLIB) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(TLIB)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $(BENCH_CFLAGS) $(LDFLAGS) -o $@ $< $(TLIB) $(LDLIBS) $(BENCH_LIBS)

$(BUILD)/load/%: tests/load/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LDLIBS)

# Every fuzz target also builds with a plain main() that replays its corpus (fuzz/replay.c),
# so `make test` catches regressions without clang's libFuzzer.
# (compiled one source at a time: one dependency file per source)
$(BUILD)/fuzz/%.o: fuzz/%.c
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -c $< -o $@

.SECONDARY: $(FUZZ_OBJ)
$(BUILD)/fuzz/%_replay: $(BUILD)/fuzz/%.o $(BUILD)/fuzz/replay.o $(TLIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/fuzz/replay.o $(TLIB) $(LDLIBS)

# make install: the binary, the public header, the static and shared core and its pkg-config
# file (prefix baked in; the core's link line only: libpcre2-8, -lm, -pthread).
install: $(LIB) $(SO) $(BIN) promptscore.pc.in
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/promptscore
	install -m 644 include/promptscore.h $(DESTDIR)$(INCLUDEDIR)/promptscore.h
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/libpromptscore.a
	install -m 755 $(SO) $(DESTDIR)$(LIBDIR)/libpromptscore.so.$(VERSION)
	ln -sf libpromptscore.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libpromptscore.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    promptscore.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/promptscore.pc

# tests/run.sh also runs every benchmark's --check (fast kernels against their references on
# small shapes, no timing) and reports the fuzz corpus replays on their own line. It runs
# PS_JOBS tests at once (default: the number of CPUs, nproc; PS_JOBS=1 runs them one after
# another) and keeps each test's output in $(BUILD)/test-logs/NAME.log.
PS_JOBS ?=
test: all $(TBIN) $(TEST_BIN) $(BENCH_BIN) $(LOAD_BIN) $(FUZZ_REPLAY)
ifneq ($(HAVE_OPENBLAS),1)
	@echo "note: OpenBLAS not found (pkg-config $(BENCH_PKGS)): bench_matmul has no cblas_sgemm baseline; apt-get install libopenblas-dev (or sh tools/setup.sh --test) adds it"
endif
	@BUILD=$(BUILD) PS_JOBS=$(PS_JOBS) sh tests/run.sh

# make test-extra (the first part of make check): the suites make test leaves out, on the plain
# build: tests/test_valgrind.sh (memcheck), test_nginx.sh and test_slurm.sh (real daemons),
# test_page.sh and test_openai.sh (Chromium and the openai npm client, through node).
test-extra: all $(TBIN) $(TEST_BIN) $(BENCH_BIN) $(LOAD_BIN) $(FUZZ_REPLAY)
	@BUILD=$(BUILD) PS_JOBS=$(PS_JOBS) PS_SUITE=check sh tests/run.sh

# make binaries: everything make test runs, built and not run
binaries: all $(TBIN) $(TEST_BIN) $(BENCH_BIN) $(LOAD_BIN) $(FUZZ_REPLAY)

# make check: make test-extra, then the test suite of make test under the sanitizers: every
# finding is fatal (-fno-sanitize-recover=all); LeakSanitizer runs at each test's exit;
# strict_string_checks flags string functions reading past an unterminated buffer. The suites of
# test-extra run on the plain build only (valgrind and ASan do not mix; the cluster and browser
# tests exercise code that test_shard.sh, test_server and test_serve_safety cover here).
check:
	$(MAKE) test-extra
	ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:check_initialization_order=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 PS_SANITIZED=1 \
	$(MAKE) BUILD=build-san SAN=1 OPT="-O1 -g" test
	$(MAKE) tsan

# make tsan (part of make check): ThreadSanitizer over the tests whose threads share state —
# the prefix cache (two sessions hitting one block chain at once), the thread pool, and the
# server (its workers share the prefix cache; connection threads, the queue, /metrics) with the
# serve binary built the same way. Any report fails the test (halt_on_error).
TSAN_TESTS := test_prefix_cache test_pool test_server
tsan:
	$(MAKE) BUILD=build-tsan SAN=thread OPT="-O1 -g" all build-tsan/tests/promptscore-t \
	    $(patsubst %,build-tsan/tests/%,$(TSAN_TESTS))
	@for t in $(TSAN_TESTS); do \
	    TSAN_OPTIONS=halt_on_error=1:abort_on_error=1 PS_SANITIZED=1 BUILD=build-tsan \
	        ./build-tsan/tests/$$t > build-tsan/$$t.log 2>&1; rc=$$?; tail -1 build-tsan/$$t.log; \
	    if [ $$rc -ne 0 ]; then echo "tsan: $$t failed (build-tsan/$$t.log)"; exit 1; fi; \
	done; echo "tsan: $(words $(TSAN_TESTS)) tests clean"

# make demo: builds, then scores examples/prompts.jsonl with a model it finds or makes
# (tools/demo.sh says which: ../shared's stories260K, the -hf cache / download, or a random one)
demo: all
	@BUILD=$(BUILD) sh tools/demo.sh

bench: all $(BENCH_BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done

fuzz:
	sh fuzz/build.sh

clean:
	rm -rf build build-san build-tsan build-fuzz

# (read last, so that no rule of theirs becomes the default goal)
-include $(DEPS)
