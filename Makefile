# ngx_http_prefix_route_module
#
#   make            build objs/ngx_http_prefix_route_module.so against
#                   Debian's nginx (nginx-dev's /usr/share/nginx/src)
#   make test       unit tests and the Test::Nginx suite (t/)
#   make demo       route sample requests through 4 local backends
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


.PHONY: all deps test unit-test sim-test nginx-test demo install clean FORCE

all: deps $(MODULE)

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
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

$(BUILD)/unit/%: t/unit/%.c src/*.c src/*.h $(NGX_BUILD)/objs/Makefile
	mkdir -p $(BUILD)/unit
	$(CC) $(UNIT_CFLAGS) -o $@ $< src/ngx_http_prefix_route_prompt.c \
	    src/ngx_http_prefix_route_hash.c src/ngx_http_prefix_route_choice.c \
	    -ljansson -lxxhash -lm

# prove exits 0 when it finds no test: that is a failure here
PROVE =         set -o pipefail; prove

unit-test: all $(UNIT_TESTS)
	@test -n "$(UNIT_TESTS)" || { echo "no unit tests found"; exit 1; }
	$(PROVE) --exec '' $(UNIT_TESTS) | tee $(BUILD)/unit.log
	@! grep -q '^Result: NOTESTS' $(BUILD)/unit.log

# The suite runs under the real Test::Nginx::Socket when it is installed,
# else under the runner bundled in t/lib.
nginx-test: all $(NGINX_BIN)
	@inc="-I t/lib"; \
	if perl -MTest::Nginx::Socket -e 1 2>/dev/null; then inc=""; fi; \
	export TEST_NGINX_BINARY=$(NGINX_BIN); \
	export TEST_NGINX_MODULE=$(CURDIR)/$(MODULE); \
	$(PROVE) $$inc t/ | tee $(BUILD)/nginx-test.log
	@! grep -q '^Result: NOTESTS' $(BUILD)/nginx-test.log

# the benchmark's inference server simulator and workload generator
sim-test: deps
	bench/sim/selftest

test: unit-test sim-test nginx-test

demo: all
	NGINX_BIN=$(NGINX_BIN) bench/demo $(CURDIR)/$(MODULE)

MODULES_DIR ?=  /usr/lib/nginx/modules

install: all
	install -d $(DESTDIR)$(MODULES_DIR)
	install -m 644 $(MODULE) $(DESTDIR)$(MODULES_DIR)/

clean:
	rm -rf $(BUILD) objs
