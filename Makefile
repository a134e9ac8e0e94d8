# ngx_http_prefix_route_module.  "make help" lists the targets;
# docs/development.md explains them, the layout and the options.  "make"
# only builds; "make test" and "make demo" first install the Debian
# packages they need (as root): on a fresh Debian 12 they are the set-up.

SHELL :=        /bin/bash
DEBIAN_SRC =    /usr/share/nginx/src
NGINX_SRC ?=    $(DEBIAN_SRC)
BUILD ?=        build
MODULE =        objs/ngx_http_prefix_route_module.so
# one configured copy of each nginx source tree used
NGX_BUILD =     $(BUILD)/nginx$(subst /,-,$(abspath $(NGINX_SRC)))
# the tests' echo module: Debian's, or with another tree built from
# Debian's source of it in a copy of its own (a module loads only into
# its own nginx version; building the module alone needs no download)
ECHO_VERSION =  0.63
ECHO_SHA256 =   d83689f095fdce67b86c1f734ae71c53cb57e43912dcd6455e9ddd715c9c2c20
ECHO_SRC =      $(BUILD)/libnginx-mod-http-echo-$(ECHO_VERSION)
ifeq ($(abspath $(NGINX_SRC)),$(DEBIAN_SRC))
NGINX_BIN ?=    /usr/sbin/nginx
ECHO_SO =       /usr/lib/nginx/modules/ngx_http_echo_module.so
else
ECHO_BUILD =    $(NGX_BUILD)-echo
ECHO_SO =       $(abspath $(ECHO_BUILD))/objs/ngx_http_echo_module.so
endif
NGINX_BIN ?=    $(NGX_BUILD)/objs/nginx
# what the tests need built before they run: the echo module of another tree
ECHO_BUILT =    $(if $(ECHO_BUILD),$(ECHO_BUILD)/objs/ngx_http_echo_module.so)
# a release after nginx's API changes of 1.23 (and an ABI other than
# Debian 12's), from Debian's archive (trixie), for "make compat-test"
COMPAT_NGINX =  1.26.3
COMPAT_SHA256 = 69ee2b237744036e61d24b836668aad3040dda461fe6f570f1787eab570c75aa
COMPAT_SRC =    $(BUILD)/nginx-$(COMPAT_NGINX)
# Debian's nginx is built with these ("nginx -V"): binary-compatible
CC_OPT =        -g -O2 -fstack-protector-strong -Wformat \
                -Werror=format-security -fPIC -Wdate-time -D_FORTIFY_SOURCE=2
LD_OPT =        -Wl,-z,relro -Wl,-z,now -fPIC
# ASAN=1: the module built with AddressSanitizer (t/asan.mk)
include t/asan.mk

FUZZ_SECONDS ?= 60
FUZZ_TEST_SECONDS ?= 20
ENGINE =        sim
BENCH_PORT ?=   21000
MODULES_DIR ?=  /usr/lib/nginx/modules
RUN =           NGINX_BIN=$(NGINX_BIN) ECHO_MODULE=$(ECHO_SO)

.PHONY: all help deps check-deps test unit-test nginx-test sim-test docs-test \
        asan-report demo install clean bench bench-feedback bench-probes \
        bench-extract bench-mend fuzz fuzz-regress fuzz-test check valgrind \
        browser-check stress deb deb-check e2e soak compat-test \
        compat-sources FORCE

## make                 build objs/ngx_http_prefix_route_module.so
## make NGINX_SRC=dir   against another nginx source tree (--with-compat)
all: $(MODULE)

# how the unit tests, the fuzzer and the extract bench are built
include t/build.mk

## make help            this list (docs/development.md tells more)
help:
	@sed -n 's/^## /  /p' Makefile

## make deps            install what build and test need (as root)
deps:
	@t/tools/deb-install test

## make check-deps      install what "make check" and "make bench" need
check-deps: deps
	@t/tools/deb-install check

$(NGX_BUILD)/objs/Makefile: config | $(NGINX_SRC)/configure
	rm -rf $(NGX_BUILD) && mkdir -p $(BUILD) && cp -r $(NGINX_SRC) $(NGX_BUILD)
	cd $(NGX_BUILD) && flags=(--with-compat --with-debug \
	    --with-http_v2_module --with-http_dav_module \
	    --with-http_stub_status_module); \
	[ -f conf_flags ] && . ./conf_flags && flags=("$${NGX_CONF_FLAGS[@]}"); \
	./configure "$${flags[@]}" --with-cc-opt="$(CC_OPT)" \
	    --with-ld-opt="$(LD_OPT)" --add-dynamic-module=$(CURDIR)

ifdef ECHO_BUILD
# --with-compat: loads into the nginx built from $(NGX_BUILD)
$(ECHO_BUILT): | $(NGINX_SRC)/configure $(ECHO_SRC)/config
	rm -rf $(ECHO_BUILD) && mkdir -p $(BUILD) \
	&& cp -r $(NGINX_SRC) $(ECHO_BUILD)
	cd $(ECHO_BUILD) && ./configure --with-compat \
	    --with-cc-opt="$(CC_OPT)" --with-ld-opt="$(LD_OPT)" \
	    --add-dynamic-module=$(abspath $(ECHO_SRC)) > configure.log
	$(MAKE) -C $(ECHO_BUILD) -f objs/Makefile modules
endif

# a source tarball from Debian's archive: pool directory, file, SHA-256
debian_source = mkdir -p $(BUILD) && cd $(BUILD) \
	&& curl -fsS -m 300 -o $(2).part \
	   https://deb.debian.org/debian/pool/main/$(1)/$(2) \
	&& echo "$(3)  $(2).part" | sha256sum -c --quiet \
	&& tar xzf $(2).part && rm $(2).part

$(ECHO_SRC)/config:
	$(call debian_source,libn/libnginx-mod-http-echo,libnginx-mod-http-echo_$(ECHO_VERSION).orig.tar.gz,$(ECHO_SHA256))
	touch $@

$(COMPAT_SRC)/configure:
	$(call debian_source,n/nginx,nginx_$(COMPAT_NGINX).orig.tar.gz,$(COMPAT_SHA256))
	touch $@

ifneq ($(abspath $(NGINX_SRC)),$(abspath $(COMPAT_SRC)))
$(NGINX_SRC)/configure:
	@echo "no nginx source at $(NGINX_SRC): make deps (as root) installs" \
	      "nginx-dev, or give NGINX_SRC=dir"; exit 1
endif

# nginx's build is incremental; the module is replaced by rename, never
# rewritten under an nginx that has it loaded
$(MODULE): $(NGX_BUILD)/objs/Makefile FORCE
	$(MAKE) -C $(NGX_BUILD) -f objs/Makefile modules
	@mkdir -p objs; so=$(NGX_BUILD)/objs/ngx_http_prefix_route_module.so; \
	cmp -s $$so $@ || { cp $$so $@.tmp && mv -f $@.tmp $@; }

$(NGX_BUILD)/objs/nginx: $(NGX_BUILD)/objs/Makefile
	$(MAKE) -C $(NGX_BUILD) -f objs/Makefile binary

## make test            unit tests, the simulator's, 20 s of fuzzing, t/,
##                      reference.md against the code (docs-test)
## make test TEST_NGINX_LIB=dir   t/ under the real Test::Nginx (its lib/)
## make test ASAN=1     the same with the module built with ASan
test: deps unit-test sim-test fuzz-test docs-test nginx-test \
      $(if $(filter 1,$(ASAN)),asan-report)

# t/tools/prove-check: a run that finds no test fails too
unit-test: all $(UNIT_TESTS)
	@test -n "$(UNIT_TESTS)" || { echo "no unit tests found"; exit 1; }
	t/tools/prove-check $(BUILD)/unit.log --exec '' $(UNIT_TESTS)

nginx-test: all $(NGINX_BIN) $(REAL_NGINX) $(BUILD)/uptime.so $(ECHO_BUILT)
	@$(if $(filter 1,$(ASAN)),rm -rf $(ASAN_LOG_DIR); mkdir $(ASAN_LOG_DIR))
	TEST_NGINX_LIB=$(TEST_NGINX_LIB) TEST_NGINX_BINARY=$(NGINX_BIN) \
	TEST_NGINX_ECHO_MODULE=$(ECHO_SO) \
	TEST_NGINX_MODULE=$(CURDIR)/$(MODULE) t/tools/prove-check \
	    $(BUILD)/nginx-test.log t/

## make compat-test     t/ with nginx 1.26.3 built from Debian's source
##                      (the module and the echo module built against it)
compat-test: deps compat-sources
	$(MAKE) nginx-test NGINX_SRC=$(COMPAT_SRC)

# the two downloads of compat-test, apart: CI tells a network failure
compat-sources: $(COMPAT_SRC)/configure $(ECHO_SRC)/config

sim-test:
	bench/sim/selftest

# every log line and its level, variable and metric in reference.md
docs-test:
	t/tools/docs-check

asan-report:
	@t/tools/asan-report $(ASAN_LOG_DIR)

## make demo            sample requests through 4 simulated backends, ~1 min
##                      (DEMO_PORT=18480: nginx's port, backends the next 4)
## make demo ENGINE=llama   the same on 3 llama.cpp servers
demo: deps all $(if $(filter llama,$(ENGINE)),$(NGINX_BIN))
	@[ "$(ENGINE)" != llama ] || t/tools/deb-install e2e
	@case "$(ENGINE)" in \
	sim)   $(RUN) bench/demo $(CURDIR)/$(MODULE) ;; \
	llama) $(RUN) e2e/run --demo $(CURDIR)/$(MODULE) ;; \
	*)     echo "make demo: ENGINE=$(ENGINE): sim or llama" >&2; exit 2 ;; \
	esac

## make install         the module into $(DESTDIR)/usr/lib/nginx/modules
##                      (built again for NGINX_SRC: give the build's)
install: all
	install -d $(DESTDIR)$(MODULES_DIR)
	install -m 644 $(MODULE) $(DESTDIR)$(MODULES_DIR)/
	@echo "installed the module built for nginx" $$(sed -n \
	    's/^#define NGINX_VERSION *"\(.*\)"/\1/p' $(NGINX_SRC)/src/core/nginx.h) \
	    "($(NGINX_SRC)) into $(DESTDIR)$(MODULES_DIR)"

## make clean           remove build/ and objs/
clean:
	rm -rf $(BUILD) objs

## make bench           bench/run/bench.py: bench/results/bench.md, ~23 min
## make bench-feedback  with and without the engines' corrections, ~13 min
## make bench-probes    with and without prefix_route_probe, ~25 min
bench bench-feedback bench-probes: all $(NGINX_BIN) check-deps
	$(RUN) /usr/bin/python3 bench/run/bench.py \
	    $(or $(subst bench-,,$(filter bench-%,$@)),bench) \
	    --module $(CURDIR)/$(MODULE) --port-base $(BENCH_PORT) $(BENCH_ARGS)

## make bench-extract   the stage from body to hashes alone, MB/s, ~3 min
bench-extract: $(BUILD)/extract_bench
	bench/extract/run $<

## make bench-mend      the zone mutex held to mend the index after a
##                      worker died mid-change, 1m to 256m zones, and
##                      requests meanwhile in a real nginx, ~18 min
MEND_ZONES ?=   1 16 64 256
bench-mend: $(BUILD)/mend_bench all $(NGINX_BIN) check-deps
	{ echo "# The mend of the index after a worker's death"; echo; \
	  echo "Written by \`make bench-mend\` on $$(date -u +%FT%TZ)," \
	       "commit $$(git rev-parse --short HEAD), $$(nproc) CPUs."; \
	  echo; $< $(MEND_ZONES); echo; \
	  echo "## In a real nginx (bench/mend/live)"; echo; \
	  $(RUN) bench/mend/live $(CURDIR)/$(MODULE); } \
	    > bench/results/mend.md.tmp
	mv bench/results/mend.md.tmp bench/results/mend.md
	cat bench/results/mend.md

## make fuzz            fuzz for FUZZ_SECONDS (60) (fuzz/README.md)
## make fuzz-regress    each input of fuzz/corpus and fuzz/regress once
fuzz fuzz-regress fuzz-test: all deps $(FUZZ_BIN)
	@fuzz/run $@ $(FUZZ_BIN) \
	    $(if $(filter fuzz,$@),$(FUZZ_SECONDS),$(FUZZ_TEST_SECONDS))

## make check           make fuzz and these, ~20 min, as root:
check: fuzz valgrind browser-check stress deb-check e2e

##   make valgrind      t/ with nginx under valgrind memcheck, ~3 min
valgrind: all $(NGINX_BIN) $(BUILD)/uptime.so $(ECHO_BUILT) check-deps
	@[ "$(ASAN)" != 1 ] || { echo "valgrind and ASAN=1 do not mix"; exit 1; }
	TEST_NGINX_ECHO_MODULE=$(ECHO_SO) \
	t/tools/valgrind-suite $(NGINX_BIN) $(CURDIR)/$(MODULE) \
	    $(CURDIR)/$(BUILD)/valgrind

##   make browser-check the HTML status page in headless Chromium, ~2 min
browser-check: all $(NGINX_BIN) check-deps
	$(RUN) t/browser/status-page $(CURDIR)/$(MODULE)

##   make stress        t/stress/: pressure, reloads, kills, ~10 min
##                      (STRESS="reload worker-kill": some of them)
stress: all $(NGINX_BIN) $(ECHO_BUILT) check-deps
	$(RUN) t/stress/run $(CURDIR)/$(MODULE) $(STRESS)

##   make deb-check     make deb, install it, nginx -t with it, purge it
deb-check: deb
	debian/tests/deb-check $(BUILD)/deb

##   make e2e           llama.cpp servers and the official SDKs, ~5 min
e2e: all $(NGINX_BIN) check-deps
	$(RUN) e2e/run $(CURDIR)/$(MODULE)

## make deb             build/deb/libnginx-mod-http-prefix-route_*.deb
deb:
	@t/tools/deb-install deb
	debian/tests/build-deb $(BUILD)/deb

## make soak            t/stress/soak for SOAK_MINUTES (30), not in check
soak: all $(NGINX_BIN) check-deps
	$(RUN) t/stress/soak $(CURDIR)/$(MODULE)
