# ngx_http_prefix_route_module
#
#   make            build objs/ngx_http_prefix_route_module.so against
#                   Debian's nginx (nginx-dev's /usr/share/nginx/src)
#   make test       unit tests and the Test::Nginx suite (t/)
#   make demo       route sample requests through 4 local backends
#   make demo ENGINE=llama
#                   the same on 3 llama.cpp servers (see make e2e)
#   make NGINX_SRC=/path/to/nginx-1.x.y
#                   build against another nginx source tree (configured
#                   --with-compat); "make test NGINX_SRC=..." also builds
#                   that nginx's binary and runs the suite with it, unless
#                   NGINX_BIN names another one
#
# "make deps" (run by all the above) installs the Debian packages the build
# and the tests need when one is missing; it needs root for that.

SHELL :=        /bin/bash

DEBIAN_SRC =    /usr/share/nginx/src
NGINX_SRC ?=    $(DEBIAN_SRC)
BUILD ?=        build
MODULE =        objs/ngx_http_prefix_route_module.so

# one configured copy of each nginx source tree used
NGX_BUILD =     $(BUILD)/nginx$(subst /,-,$(abspath $(NGINX_SRC)))

ifeq ($(abspath $(NGINX_SRC)),$(DEBIAN_SRC))
NGINX_BIN ?=    /usr/sbin/nginx
else
NGINX_BIN ?=    $(NGX_BUILD)/objs/nginx
endif

DEB_PACKAGES =  nginx nginx-dev libxxhash-dev libjansson-dev gcc make \
                libtest-base-perl libtext-diff-perl libwww-perl \
                libnginx-mod-http-echo \
                curl perl python3

SOURCES =       config ngx_http_prefix_route_module.c \
                $(wildcard src/*.c src/*.h)

# Debian's nginx is built with these; the module uses the same so that it is
# binary-compatible with /usr/sbin/nginx ("nginx -V").
CC_OPT =        -g -O2 -fstack-protector-strong -Wformat \
                -Werror=format-security -fPIC -Wdate-time -D_FORTIFY_SOURCE=2
LD_OPT =        -Wl,-z,relro -Wl,-z,now -fPIC

UNIT_TESTS =    $(patsubst t/unit/%.c,$(BUILD)/unit/%,$(wildcard t/unit/*.c))
UNIT_CFLAGS =   -g -O1 -W -Wall -Wpointer-arith -Wno-unused-parameter -Werror \
                -I $(NGX_BUILD)/src/core -I $(NGX_BUILD)/src/event \
                -I $(NGX_BUILD)/src/os/unix \
                -I $(NGX_BUILD)/objs -I src

# ASAN=1: the module (and, with NGINX_SRC, nginx itself) built with
# AddressSanitizer, in a tree of its own ($(NGX_BUILD)-asan), into
# objs/ngx_http_prefix_route_module-asan.so; "make test ASAN=1" runs the
# suite with it (see "Memory checks" below).
ifeq ($(ASAN),1)
NGX_BUILD :=    $(NGX_BUILD)-asan
MODULE =        objs/ngx_http_prefix_route_module-asan.so
CC_OPT +=       -fsanitize=address -fno-omit-frame-pointer
LD_OPT +=       -fsanitize=address
ASAN_NGINX :=   $(NGINX_BIN)
NGINX_BIN =     $(BUILD)/asan/nginx
# for a test to skip what ASan changes (resident memory: its shadow memory)
export TEST_NGINX_ASAN = 1
endif


.PHONY: all deps test unit-test sim-test nginx-test demo install clean FORCE

all: deps $(MODULE)

# installs the Debian packages $(1) that are missing (as root)
define deb-install
@missing=""; \
for p in $(1); do \
    dpkg-query -W -f='$${Status}' $$p 2>/dev/null \
        | grep -q 'install ok installed' || missing="$$missing $$p"; \
done; \
if [ -n "$$missing" ]; then \
    if [ "$$(id -u)" != 0 ]; then \
        echo "missing Debian packages:$$missing (run make as root)"; \
        exit 1; \
    fi; \
    echo "installing:$$missing"; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update -qq && apt-get install -y -qq --no-install-recommends \
        $$missing; \
fi
endef

deps:
	$(call deb-install,$(DEB_PACKAGES))

$(NGX_BUILD)/objs/Makefile: $(NGINX_SRC)/configure config Makefile
	rm -rf $(NGX_BUILD)
	mkdir -p $(BUILD)
	cp -r $(NGINX_SRC) $(NGX_BUILD)
	cd $(NGX_BUILD) && \
	flags=(--with-compat --with-debug); \
	if [ -f conf_flags ]; then . ./conf_flags; flags=("$${NGX_CONF_FLAGS[@]}"); fi; \
	./configure "$${flags[@]}" \
	    --with-cc-opt="$(CC_OPT)" --with-ld-opt="$(LD_OPT)" \
	    --add-dynamic-module=$(CURDIR)

$(NGINX_SRC)/configure:
	@echo "no nginx source at NGINX_SRC=$(NGINX_SRC)"; exit 1

# always asks the nginx build (which is incremental): objs/ then holds the
# module built against the NGINX_SRC of the last make; replaced by rename,
# never rewritten under an nginx that has it loaded
$(MODULE): $(NGX_BUILD)/objs/Makefile FORCE
	$(MAKE) -C $(NGX_BUILD) -f objs/Makefile modules
	mkdir -p objs
	cmp -s $(NGX_BUILD)/objs/ngx_http_prefix_route_module.so $@ \
	    || { cp $(NGX_BUILD)/objs/ngx_http_prefix_route_module.so $@.tmp \
	         && mv -f $@.tmp $@; }

$(NGX_BUILD)/objs/nginx: $(NGX_BUILD)/objs/Makefile
	$(MAKE) -C $(NGX_BUILD) -f objs/Makefile binary

$(BUILD)/unit/%: t/unit/%.c t/unit/lib/*.c src/*.c src/*.h \
                 $(NGX_BUILD)/objs/Makefile
	mkdir -p $(BUILD)/unit
	$(CC) $(UNIT_CFLAGS) -o $@ $< src/ngx_http_prefix_route_prompt.c \
	    src/ngx_http_prefix_route_hash.c src/ngx_http_prefix_route_choice.c \
	    src/ngx_http_prefix_route_usage.c \
	    src/ngx_http_prefix_route_metrics.c \
	    src/ngx_http_prefix_route_extract.c src/ngx_http_prefix_route_scan.c \
	    t/unit/lib/ngx_read_file.c -ljansson -lxxhash -lm

# the index test links nginx's own slab allocator, red-black tree, shared
# mutex and pools, from nginx's source (nginx-dev has headers only)
NGX_ORIG =      $(BUILD)/nginx-orig
NGX_ORIG_SRCS = $(addprefix $(NGX_ORIG)/src/, core/ngx_slab.c \
                core/ngx_rbtree.c core/ngx_shmtx.c core/ngx_palloc.c \
                core/ngx_string.c os/unix/ngx_alloc.c)

$(NGX_ORIG)/src/core/ngx_slab.c:
	t/unit/nginx-source $(NGX_ORIG) $(NGINX_SRC)

$(BUILD)/unit/index_test: t/unit/index_test.c src/*.c src/*.h \
                          $(NGX_BUILD)/objs/Makefile $(NGX_ORIG)/src/core/ngx_slab.c
	mkdir -p $(BUILD)/unit
	$(CC) $(UNIT_CFLAGS) -o $@ $< src/ngx_http_prefix_route_index.c \
	    src/ngx_http_prefix_route_load.c src/ngx_http_prefix_route_choice.c \
	    $(NGX_ORIG_SRCS) -lm

# prove exits 0 when it finds no test: that is a failure here
PROVE =         set -o pipefail; prove

unit-test: all $(UNIT_TESTS)
	@test -n "$(UNIT_TESTS)" || { echo "no unit tests found"; exit 1; }
	$(PROVE) --exec '' $(UNIT_TESTS) | tee $(BUILD)/unit.log
	@! grep -q '^Result: NOTESTS' $(BUILD)/unit.log

# The suite runs under the real Test::Nginx::Socket when it is installed,
# else under the runner bundled in t/lib.
# TEST_NGINX_LIB=dir: the real Test::Nginx (openresty/test-nginx's lib/)
# in place of the runner of t/lib; an installed one is used by default
nginx-test: all $(NGINX_BIN)
	@inc="-I t/lib"; \
	if perl -MTest::Nginx::Socket -e 1 2>/dev/null; then inc=""; fi; \
	if [ -n "$(TEST_NGINX_LIB)" ]; then inc="-I $(TEST_NGINX_LIB)"; fi; \
	export TEST_NGINX_BINARY=$(NGINX_BIN); \
	export TEST_NGINX_MODULE=$(CURDIR)/$(MODULE); \
	$(PROVE) $$inc t/ | tee $(BUILD)/nginx-test.log
	@! grep -q '^Result: NOTESTS' $(BUILD)/nginx-test.log

# the benchmark's inference server simulator and workload generator
sim-test: deps
	bench/sim/selftest

# the Test::Nginx suite last: its summary closes the output
test: unit-test sim-test fuzz-test nginx-test

# ENGINE=sim (the default): bench/demo, 4 simulated backends;
# ENGINE=llama: e2e/run --demo, 3 llama.cpp servers (built as for make e2e).
# Set on the command line only: an ENGINE in the environment is ignored.
ENGINE =        sim

demo: all $(if $(filter llama,$(ENGINE)),$(NGINX_BIN) e2e-deps)
	@case "$(ENGINE)" in \
	sim)	NGINX_BIN=$(NGINX_BIN) bench/demo $(CURDIR)/$(MODULE) ;; \
	llama)	NGINX_BIN=$(NGINX_BIN) E2E_PORT=$(E2E_PORT) \
			e2e/run --demo $(CURDIR)/$(MODULE) ;; \
	*)	echo "make demo: unknown ENGINE=$(ENGINE) (sim or llama)" >&2; \
		exit 2 ;; \
	esac

MODULES_DIR ?=  /usr/lib/nginx/modules

install: all
	install -d $(DESTDIR)$(MODULES_DIR)
	install -m 644 $(MODULE) $(DESTDIR)$(MODULES_DIR)/

clean:
	rm -rf $(BUILD) objs


# --- Debian package --------------------------------------------------------
#
#   make deb        build/deb/libnginx-mod-http-prefix-route_VERSION_ARCH.deb,
#                   built by dpkg-buildpackage with nginx-dev's nginx
#                   debhelper sequence, in a copy of the tree under build/deb
#   make deb-deps   install the build dependencies that are missing (root)
#   make deb-check  install the package, check "nginx -t" with its
#                   load_module snippet enabled, purge it again (root)
#   make check      the longer checks, deb-check among them

DEB_NAME =       libnginx-mod-http-prefix-route
DEB_DIR =        $(BUILD)/deb
DEB_BUILD_DEPS = debhelper dpkg-dev fakeroot build-essential nginx nginx-dev \
                 libjansson-dev libxxhash-dev
# what the package is built from
DEB_TREE =       config ngx_http_prefix_route_module.c src debian README.md \
                 docs examples

.PHONY: deb deb-deps deb-check check

deb-deps:
	$(call deb-install,$(DEB_BUILD_DEPS))

# dpkg-buildpackage writes the .deb (and .buildinfo, .changes) next to the
# tree it builds: build/deb; nothing is written outside build/deb
deb: deb-deps
	@set -e; \
	version=$$(dpkg-parsechangelog -l debian/changelog -S Version); \
	tree=$(DEB_DIR)/$(DEB_NAME)-$${version%-*}; \
	rm -rf $(DEB_DIR); \
	mkdir -p $$tree; \
	cp -r $(DEB_TREE) $$tree/; \
	(cd $$tree && dpkg-buildpackage -b -us -uc); \
	deb=$(DEB_DIR)/$(DEB_NAME)_$${version}_$$(dpkg --print-architecture).deb; \
	test -f $$deb; \
	echo "built $$deb"

# Leaves the machine as it was: refuses to run when the package, or a
# module file of the same name, is already there; purges the package
# (dpkg -r would leave the disabled snippet link behind, as *.removed).
deb-check: deb
	@set -e; \
	if [ "$$(id -u)" != 0 ]; then \
	    echo "deb-check installs a package: run it as root"; exit 1; \
	fi; \
	status=$$(dpkg-query -W -f='$${Status}' $(DEB_NAME) 2>/dev/null || true); \
	case "$$status" in \
	    ""|*not-installed) ;; \
	    *) echo "$(DEB_NAME) is on this machine ($$status):" \
	            "deb-check leaves it alone"; exit 1 ;; \
	esac; \
	for f in /usr/lib/nginx/modules/ngx_http_prefix_route_module.so \
	         /usr/share/nginx/modules-available/mod-http-prefix-route.conf \
	         /etc/nginx/modules-enabled/50-mod-http-prefix-route.conf \
	         /etc/nginx/modules-enabled/50-mod-http-prefix-route.conf.removed; \
	do \
	    if [ -e $$f ] || [ -L $$f ]; then \
	        echo "$$f exists (make install?): deb-check leaves it alone"; \
	        exit 1; \
	    fi; \
	done; \
	version=$$(dpkg-parsechangelog -l debian/changelog -S Version); \
	deb=$(DEB_DIR)/$(DEB_NAME)_$${version}_$$(dpkg --print-architecture).deb; \
	tmp=$(CURDIR)/$(BUILD)/deb-check; \
	rm -rf $$tmp; \
	mkdir -p $$tmp; \
	trap 'dpkg --purge $(DEB_NAME) >/dev/null 2>&1 || true' EXIT; \
	dpkg -i $$deb; \
	rc=0; \
	AUTOPKGTEST_TMP=$$tmp debian/tests/nginx-t || rc=$$?; \
	dpkg --purge $(DEB_NAME); \
	trap - EXIT; \
	for f in /usr/lib/nginx/modules/ngx_http_prefix_route_module.so \
	         /usr/share/nginx/modules-available/mod-http-prefix-route.conf \
	         /etc/nginx/modules-enabled/50-mod-http-prefix-route.conf \
	         /etc/nginx/modules-enabled/50-mod-http-prefix-route.conf.removed; \
	do \
	    if [ -e $$f ] || [ -L $$f ]; then \
	        echo "FAIL: $$f left behind after purge"; rc=1; \
	    fi; \
	done; \
	if [ $$rc = 0 ]; then echo "deb-check: ok"; else echo "deb-check: FAILED"; fi; \
	exit $$rc

# the longer checks; other parts add theirs as prerequisites of "check"
check: deb-check


# --- Fuzzing -----------------------------------------------------------------
#
#   make fuzz [FUZZ_SECONDS=60]
#                   fuzz/prompt_fuzzer.c under libFuzzer for FUZZ_SECONDS:
#                   request body bytes -> jansson (as the module parses a
#                   body) -> canonical prompt -> block hashes, built with
#                   clang's ASan, UBSan and LeakSanitizer, checking the
#                   prompt's invariants; starts from fuzz/corpus (the four
#                   API shapes and odd bodies), fuzz/regress (inputs that
#                   once failed) and what earlier runs found, kept in
#                   build/fuzz/corpus.  A failing input is written to
#                   build/fuzz/crash-* (or leak-*, timeout-*, oom-*): add
#                   it to fuzz/regress.  Bounded: FUZZ_TIMEOUT seconds and
#                   FUZZ_RSS_MB of memory per input, and a hard limit of
#                   FUZZ_SECONDS + 300 s for the whole run.
#   make fuzz-regress
#                   each input of fuzz/corpus and fuzz/regress, once
#   make test       runs fuzz-test: fuzz-regress, then FUZZ_TEST_SECONDS
#                   (20; 0 skips it) of fuzzing.  Its packages are cheap:
#                   clang and libclang-rt-dev (libFuzzer's runtime) come
#                   with Debian 12's C images, and are about 35 MB to
#                   install otherwise ("make fuzz-deps", as root).
#
#   The fuzzer links jansson built from Debian's own source of the
#   version the module runs on (JANSSON_VERSION, fetched once from the
#   archive's pool and checked against its SHA-256), instrumented like
#   the rest: Debian's libjansson is not, and that hid a heap overflow in
#   its lexer from the fuzzer (fuzz/README.md).  Built with its CMake
#   into build/fuzz/jansson (about 30 s, once).

FUZZ_PACKAGES =     clang libclang-rt-dev cmake curl
FUZZ_CC ?=          clang
FUZZ_SECONDS ?=     60
FUZZ_TEST_SECONDS ?= 20
FUZZ_TIMEOUT ?=     10
FUZZ_RSS_MB ?=      2048
FUZZ_MAX_LEN ?=     200000
FUZZ_DIR =          $(BUILD)/fuzz
FUZZ_BIN =          $(FUZZ_DIR)/prompt_fuzzer
FUZZ_CFLAGS =       $(UNIT_CFLAGS) -fsanitize=fuzzer,address,undefined \
                    -fno-sanitize-recover=all
FUZZ_OPTS =         -dict=fuzz/json.dict -timeout=$(FUZZ_TIMEOUT) \
                    -rss_limit_mb=$(FUZZ_RSS_MB) -max_len=$(FUZZ_MAX_LEN) \
                    -detect_leaks=1 -artifact_prefix=$(FUZZ_DIR)/

# Debian 12's jansson (libjansson4 2.14-2); Debian's one patch touches
# only its tests
JANSSON_VERSION =   2.14
JANSSON_TARBALL =   jansson_$(JANSSON_VERSION).orig.tar.gz
JANSSON_POOL =      http://deb.debian.org/debian/pool/main/j/jansson
JANSSON_SHA256 = \
    c739578bf6b764aa0752db9a2fdadcfe921c78f1228c7ec0bb47fa804c55d17b
JANSSON_DIR =       $(FUZZ_DIR)/jansson
JANSSON_LIB =       $(JANSSON_DIR)/build/lib/libjansson.a

.PHONY: fuzz fuzz-deps fuzz-regress fuzz-test

fuzz-deps:
	$(call deb-install,$(FUZZ_PACKAGES))

$(JANSSON_LIB):
	rm -rf $(JANSSON_DIR)
	mkdir -p $(JANSSON_DIR)
	curl -fsS --retry 3 -o $(JANSSON_DIR)/$(JANSSON_TARBALL) \
	    $(JANSSON_POOL)/$(JANSSON_TARBALL)
	echo "$(JANSSON_SHA256)  $(JANSSON_DIR)/$(JANSSON_TARBALL)" \
	    | sha256sum -c --quiet
	tar -C $(JANSSON_DIR) -xzf $(JANSSON_DIR)/$(JANSSON_TARBALL)
	cmake -S $(JANSSON_DIR)/jansson-$(JANSSON_VERSION) \
	    -B $(JANSSON_DIR)/build -DCMAKE_C_COMPILER=$(FUZZ_CC) \
	    -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS="-g -O1 \
	    -fsanitize=fuzzer-no-link,address,undefined \
	    -fno-sanitize-recover=all" -DJANSSON_BUILD_DOCS=OFF \
	    -DJANSSON_WITHOUT_TESTS=ON -DJANSSON_EXAMPLES=OFF \
	    -DJANSSON_BUILD_SHARED_LIBS=OFF > $(JANSSON_DIR)/build.log 2>&1 \
	    && $(MAKE) -C $(JANSSON_DIR)/build >> $(JANSSON_DIR)/build.log \
	    2>&1 || { tail -30 $(JANSSON_DIR)/build.log; exit 1; }

$(FUZZ_BIN): fuzz/prompt_fuzzer.c t/unit/lib/*.c src/*.c src/*.h \
             $(NGX_BUILD)/objs/Makefile $(JANSSON_LIB)
	mkdir -p $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -I $(JANSSON_DIR)/build/include \
	    -o $@ fuzz/prompt_fuzzer.c \
	    src/ngx_http_prefix_route_prompt.c src/ngx_http_prefix_route_hash.c \
	    src/ngx_http_prefix_route_usage.c \
	    src/ngx_http_prefix_route_metrics.c \
	    src/ngx_http_prefix_route_extract.c src/ngx_http_prefix_route_scan.c \
	    t/unit/lib/ngx_read_file.c $(JANSSON_LIB) -lxxhash

fuzz-regress: deps fuzz-deps $(FUZZ_BIN)
	@set -o pipefail; \
	$(FUZZ_BIN) $(FUZZ_OPTS) fuzz/corpus/* fuzz/regress/* \
	    > $(FUZZ_DIR)/regress.log 2>&1 \
	    || { tail -60 $(FUZZ_DIR)/regress.log; \
	         echo "fuzz-regress: FAILED (log: $(FUZZ_DIR)/regress.log)"; \
	         exit 1; }; \
	echo "fuzz-regress: $$(grep -c '^Executed ' $(FUZZ_DIR)/regress.log)" \
	     "inputs of fuzz/corpus and fuzz/regress, no failure"

fuzz: deps fuzz-deps $(FUZZ_BIN)
	@if ! [ "$(FUZZ_SECONDS)" -gt 0 ] 2>/dev/null; then \
	    echo "FUZZ_SECONDS=$(FUZZ_SECONDS): a number of seconds > 0"; \
	    exit 1; \
	fi; \
	mkdir -p $(FUZZ_DIR)/corpus; \
	echo "fuzzing for $(FUZZ_SECONDS) s (log: $(FUZZ_DIR)/fuzz.log)"; \
	timeout -k 10 $$(( $(FUZZ_SECONDS) + 300 )) \
	    $(FUZZ_BIN) $(FUZZ_OPTS) -max_total_time=$(FUZZ_SECONDS) \
	    -print_final_stats=1 $(FUZZ_DIR)/corpus fuzz/corpus fuzz/regress \
	    > $(FUZZ_DIR)/fuzz.log 2>&1; \
	rc=$$?; \
	grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::|^Done ' \
	    $(FUZZ_DIR)/fuzz.log; \
	if [ $$rc != 0 ]; then \
	    tail -60 $(FUZZ_DIR)/fuzz.log; \
	    echo "fuzz: FAILED ($$rc): the input is in $(FUZZ_DIR)/," \
	         "add it to fuzz/regress"; \
	    exit 1; \
	fi

fuzz-test: fuzz-regress
	@if [ "$(FUZZ_TEST_SECONDS)" != 0 ]; then \
	    $(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_TEST_SECONDS); \
	fi



# --- Memory checks -----------------------------------------------------------
#
#   make valgrind   the Test::Nginx suite with nginx under valgrind memcheck
#                   (the bundled runner's TEST_NGINX_USE_VALGRIND=1, as in
#                   the real Test::Nginx: "daemon off", nginx in the
#                   foreground under "valgrind --tool=memcheck
#                   --leak-check=full --show-possibly-lost=no
#                   --errors-for-leak-kinds=definite --error-exitcode=99
#                   --log-file=...", one log a process in build/valgrind/,
#                   one test an nginx instance); fails on a definite leak,
#                   an invalid read or write, a use of uninitialised memory
#                   that t/valgrind.suppress does not cover (nginx core's
#                   own startup allocations only, never a module frame).
#                   About 3 minutes (the suite alone: under 1).
#   make ASAN=1     objs/ngx_http_prefix_route_module-asan.so, built with
#                   -fsanitize=address -fno-omit-frame-pointer
#   make test ASAN=1
#                   the suite with it, then asan-report: fails on any ASan
#                   error and on a leak with a module frame (reports in
#                   build/asan-log/asan.<pid>; "make asan-report" shows
#                   them after a failed run).  Debian's /usr/sbin/nginx is
#                   not built with ASan: it loads an ASan module only with
#                   gcc's runtime preloaded, first (without it: "ASan
#                   runtime does not come first in initial library list"),
#                   so the suite runs build/asan/nginx, a script that runs
#                   nginx with
#                       LD_PRELOAD=$$(gcc -print-file-name=libasan.so)
#                       ASAN_OPTIONS=log_path=build/asan-log/asan:...
#                   (by hand: LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libasan.so.8
#                   nginx ...), and exports TEST_NGINX_ASAN=1 for tests
#                   to skip what ASan changes (resident memory).  With
#                   NGINX_SRC, that nginx is built with ASan as well.
#   make check      fuzz (FUZZ_SECONDS) and valgrind among the longer checks

VALGRIND_PACKAGES = valgrind
VALGRIND_LOG_DIR =  $(CURDIR)/$(BUILD)/valgrind
ASAN_LOG_DIR =      $(CURDIR)/$(BUILD)/asan-log
ASAN_RUNTIME =      $(shell $(CC) -print-file-name=libasan.so)
# ASan's options for nginx: reports to files; leaks too, without changing
# an exit status (nginx core leaves some memory at exit, see asan-report);
# an invalid access aborts the process.  Debian's nginx and libraries have
# no frame pointers, so a malloc stack stops at their first frame: a
# module frame is still there for what the module and jansson allocate
# (jansson allocates through the module's json_malloc, in
# src/ngx_http_prefix_route_extract.c).
# ASAN_UNWIND=fast_unwind_on_malloc=0 gives whole stacks, 20 times slower.
ASAN_OPTIONS_NGINX = log_path=$(ASAN_LOG_DIR)/asan:detect_leaks=1:$\
                     exitcode=0:abort_on_error=1:$(ASAN_UNWIND)
ASAN_UNWIND ?=      fast_unwind_on_malloc=1

.PHONY: valgrind valgrind-deps asan-clean asan-report

valgrind-deps:
	$(call deb-install,$(VALGRIND_PACKAGES))

# the bundled runner (t/lib) even when the real Test::Nginx is installed:
# it is the one that fails a test on a valgrind error
valgrind: all $(NGINX_BIN) valgrind-deps
	@if [ "$(ASAN)" = 1 ]; then echo "valgrind and ASAN=1 do not mix"; \
	    exit 1; fi
	rm -rf $(VALGRIND_LOG_DIR)
	@export TEST_NGINX_BINARY=$(NGINX_BIN); \
	export TEST_NGINX_MODULE=$(CURDIR)/$(MODULE); \
	export TEST_NGINX_USE_VALGRIND=1; \
	export TEST_NGINX_VALGRIND_LOG_DIR=$(VALGRIND_LOG_DIR); \
	set -o pipefail; \
	prove -I t/lib t/ | tee $(BUILD)/valgrind.log; \
	rc=$$?; \
	logs=$$(ls $(VALGRIND_LOG_DIR)/*.log 2>/dev/null | wc -l); \
	bad=$$(grep -L 'ERROR SUMMARY: 0 errors' $(VALGRIND_LOG_DIR)/*.log \
	       2>/dev/null); \
	echo "valgrind: $$logs nginx processes checked," \
	     "$$(echo -n "$$bad" | grep -c .) with errors" \
	     "(logs: $(VALGRIND_LOG_DIR))"; \
	for f in $$bad; do echo "  $$f"; done; \
	grep -q '^Result: NOTESTS' $(BUILD)/valgrind.log && rc=1; \
	[ $$rc = 0 ] && [ $$logs -gt 0 ] && [ -z "$$bad" ]

ifeq ($(ASAN),1)
$(NGINX_BIN): $(ASAN_NGINX) Makefile
	mkdir -p $(dir $@) $(ASAN_LOG_DIR)
	printf '%s\n' '#!/bin/sh' \
	    '# nginx with the ASan runtime preloaded, for the module built' \
	    '# by "make ASAN=1" (written by the Makefile)' \
	    'export LD_PRELOAD="$(ASAN_RUNTIME)$${LD_PRELOAD:+:$$LD_PRELOAD}"' \
	    'export ASAN_OPTIONS="$${ASAN_OPTIONS:-$(ASAN_OPTIONS_NGINX)}"' \
	    'exec $(abspath $(ASAN_NGINX)) "$$@"' > $@.tmp
	chmod +x $@.tmp
	mv -f $@.tmp $@

nginx-test: asan-clean
test: asan-report
endif

asan-clean:
	rm -rf $(ASAN_LOG_DIR)
	mkdir -p $(ASAN_LOG_DIR)

# Fails on any ASan error (invalid read or write, use after free...), and
# on a leak whose allocation stack has a frame of the module, jansson or
# xxHash; the leaks of nginx core alone (its first pool in main() at
# "nginx -V" and on startup errors, a worker's connections, the PCRE2
# compile context) are only counted.
define ASAN_REPORT_PL
my ($$dir) = @ARGV;
my ($$bad, $$ncore, %core) = (0, 0);
for my $$f (sort glob "$$dir/asan.*") {
    my $$t = do { local (@ARGV, $$/) = ($$f); <> };
    if ($$t !~ /ERROR: LeakSanitizer/) {
        print "$$f:\n$$t\n";
        $$bad++;
        next;
    }
    for my $$r (split /\n\s*\n/, $$t) {
        next unless $$r =~ /^(?:Direct|Indirect) leak of/m;
        if ($$r =~ /prefix_route|libjansson|libxxhash/) {
            print "$$f:\n$$r\n\n";
            $$bad++;
        } else {
            my @at = grep { !/^__interceptor/ }
                     $$r =~ /^\s*#\d+ 0x\w+ in (\w+)/mg;
            splice @at, 3 if @at > 3;
            $$core{join " < ", @at}++;
            $$ncore++;
        }
    }
}
print "ASan: $$ncore leak(s) of nginx core alone, not counted: ",
      join("; ", map { "$$_ ($$core{$$_})" } sort keys %core), "\n"
    if $$ncore;
print $$bad ? "ASan: $$bad report(s) of the module in $$dir\n"
            : "ASan: no report of the module\n";
exit($$bad ? 1 : 0);
endef
export ASAN_REPORT_PL

asan-report:
	@perl -e "$$ASAN_REPORT_PL" $(ASAN_LOG_DIR)

check: fuzz valgrind

# --- The HTML status page in a browser ------------------------------------
#
#   make browser-check   headless Chromium renders prefix_route_status's
#                        page, its DOM and screenshot are checked, and
#                        promtool checks its metrics (t/browser/status-page;
#                        part of "make check")

BROWSER_PACKAGES = chromium python3-pil prometheus

.PHONY: browser-check browser-deps

browser-deps:
	$(call deb-install,$(BROWSER_PACKAGES))

browser-check: all browser-deps
	NGINX_BIN=$(NGINX_BIN) t/browser/status-page $(CURDIR)/$(MODULE)

check: browser-check


# --- Benchmark ---------------------------------------------------------------
#
#   make bench      the benchmark of bench/run/README.md: multi-turn chat
#                   with a global preamble, shared-prefix groups and the
#                   Mooncake trace (../shared/workloads/mooncake/, skipped
#                   when absent) through nginx with round robin,
#                   least_conn, random two least_conn, hash on the
#                   conversation and prefix_route (one and three nginx
#                   instances) in front of 4 simulated backends, beside
#                   the pooled-cache bound.  Results in bench/results/:
#                   bench.md, bench.json, raw/*.json, PNG plots.  About 11
#                   minutes on 2 cores; nginx on 127.0.0.1 ports
#                   BENCH_PORT..BENCH_PORT+2, the backends on
#                   BENCH_PORT+10..+13.  BENCH_ARGS passes options to
#                   "bench/run/bench.py bench", e.g.
#                   BENCH_ARGS="--workloads shared-prefix".
#   make bench-feedback
#                   prefix_route with and without the engines' corrections
#                   (feedback=correct):
#                   capacity= 4x the simulators' cache, 3 nginx instances,
#                   how often the index predicts the cached tokens the
#                   engine reports (bench/results/feedback.md, ~15 min)
#   make bench-probes
#                   prefix_route with and without prefix_route_probe while
#                   30% of the load goes straight to the backends, with 3
#                   nginx instances, and with a backend restarted
#                   (bench/results/probes.md, ~20 min)
#   make bench-extract
#                   the stage from body to hashes alone, MB/s and us a body,
#                   and its parts (jansson, prompt, hashes), on chat bodies
#                   of 1 to 512 KiB (bench/results/extract.md, ~1 min)
#   make bench-deps install python3-matplotlib (the plots) when missing,
#                   as root; make test does not need it

BENCH_PACKAGES =    python3-matplotlib
BENCH_PORT ?=       21000
BENCH_ARGS ?=

.PHONY: bench bench-deps bench-feedback bench-probes bench-extract

bench-deps:
	$(call deb-install,$(BENCH_PACKAGES))

bench: all $(NGINX_BIN) bench-deps
	NGINX_BIN=$(NGINX_BIN) /usr/bin/python3 bench/run/bench.py bench \
	    --module $(CURDIR)/$(MODULE) --port-base $(BENCH_PORT) $(BENCH_ARGS)

# with and without feedback=correct: capacity= 4x too large, 3 nginx
# instances, the prediction's accuracy (bench/results/feedback.md)
bench-feedback: all $(NGINX_BIN) bench-deps
	NGINX_BIN=$(NGINX_BIN) /usr/bin/python3 bench/run/bench.py feedback \
	    --module $(CURDIR)/$(MODULE) --port-base $(BENCH_PORT)

# the stage from body to hashes alone, MB/s (bench/results/extract.md)
EXTRACT_BENCH =     $(BUILD)/extract_bench

$(EXTRACT_BENCH): bench/extract/extract_bench.c t/unit/lib/*.c src/*.c \
                  src/*.h $(NGX_BUILD)/objs/Makefile
	$(CC) $(subst -O1,-O2,$(UNIT_CFLAGS)) -o $@ $< \
	    src/ngx_http_prefix_route_extract.c src/ngx_http_prefix_route_scan.c \
	    src/ngx_http_prefix_route_prompt.c src/ngx_http_prefix_route_hash.c \
	    t/unit/lib/ngx_read_file.c -ljansson -lxxhash

bench-extract: $(EXTRACT_BENCH)
	bench/extract/run $(EXTRACT_BENCH)

# with and without prefix_route_probe: 30% of the load past nginx, 3 nginx
# instances, a backend restarted (bench/results/probes.md)
bench-probes: all $(NGINX_BIN) bench-deps
	NGINX_BIN=$(NGINX_BIN) /usr/bin/python3 bench/run/bench.py probes \
	    --module $(CURDIR)/$(MODULE) --port-base $(BENCH_PORT)


# --- Stress checks -----------------------------------------------------------
#
#   make stress     the scripts of t/stress/ (issue 4, parts 4 and 5), one
#                   after the other, with the module built by make and
#                   $(NGINX_BIN) (2 workers, a master, a temporary prefix
#                   under /tmp, as root or not), wrk and curl, on
#                   127.0.0.1 ports 19801-19895; each bounded in time and
#                   requests, at most STRESS_TIMEOUT s (240), and each
#                   ends every process it started, also on failure:
#                     zone-pressure    1,000,000 distinct prompts into a
#                                      128k zone (~70 s); one request
#                                      inserts at most max_prefix / block
#                     backend-restart  a backend killed and restarted
#                     reload           SIGHUP to the master every 2.5 s
#                     worker-kill      a worker killed with SIGKILL
#                     client-abort     clients that give up mid-request
#                     inflight         400 requests in flight on a full
#                                      zone, all counted (1 and 2 workers)
#                     spread           new prompts spread evenly over 4
#                                      servers (1 and 2 workers)
#                     tenant-flood     a tenant's repeated prompts stay
#                                      known while another floods a full
#                                      zone with distinct ones (1 and 2
#                                      workers), or with repeated ones
#                                      under tenant_share=50%
#                   About 7 minutes on 2 cores.  STRESS="reload
#                   worker-kill" runs some of them.  Part of "make check".
#   make stress-deps
#                   install wrk (and the other tools the scripts use) when
#                   missing, as root

STRESS_PACKAGES =   wrk curl perl procps libnginx-mod-http-echo
STRESS ?=
STRESS_TIMEOUT ?=   240

.PHONY: stress stress-deps

stress-deps:
	$(call deb-install,$(STRESS_PACKAGES))

stress: all $(NGINX_BIN) stress-deps
	NGINX_BIN=$(NGINX_BIN) STRESS_TIMEOUT=$(STRESS_TIMEOUT) \
	    t/stress/run $(CURDIR)/$(MODULE) $(STRESS)

check: stress


# --- End to end with llama.cpp ----------------------------------------------
#
#   make e2e        e2e/run: llama-server built from the llama.cpp source
#                   that the npm package node-llama-cpp carries (cached in
#                   build/e2e/), a random-weight model, 3 servers and nginx
#                   on 127.0.0.1 E2E_PORT..+3 (24100), the official OpenAI
#                   and Anthropic SDKs through it (e2e/README.md).  Needs
#                   Node.js and npm; installs cmake, ninja and g++.

# Debian's Node.js and npm only where the machine has none of its own
E2E_PACKAGES = cmake ninja-build g++ git curl \
               $(if $(shell command -v npm),,nodejs npm)
E2E_PORT ?=    24100

.PHONY: e2e e2e-deps

e2e-deps:
	$(call deb-install,$(E2E_PACKAGES))

e2e: all $(NGINX_BIN) e2e-deps
	NGINX_BIN=$(NGINX_BIN) E2E_PORT=$(E2E_PORT) e2e/run $(CURDIR)/$(MODULE)

check: e2e


# --- Soak --------------------------------------------------------------------
#
#   make soak [SOAK_MINUTES=30]
#                   t/stress/soak: SOAK_MINUTES of hot shared prefixes,
#                   conversations, distinct prompts and hostile bodies at
#                   ~80% of this machine's measured capacity, through
#                   nginx (2 workers) with a 1m zone over 4 backends; a
#                   reload every 30 s and a worker killed with SIGKILL
#                   every 2 minutes.  Fails on a crash, a lost request,
#                   worker RSS growth (> 10% or 5 MB), an index check
#                   error (status?check=1 every ~10 s) or in-flight work
#                   left behind.  Loopback ports 19861-19865; at most
#                   SOAK_MINUTES + 4 minutes.  Not part of "make check".

SOAK_MINUTES ?= 30

.PHONY: soak

soak: all $(NGINX_BIN) stress-deps
	NGINX_BIN=$(NGINX_BIN) SOAK_MINUTES=$(SOAK_MINUTES) \
	    t/stress/soak $(CURDIR)/$(MODULE)
