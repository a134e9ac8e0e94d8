# ngx_http_prefix_route_module
#
#   make            build objs/ngx_http_prefix_route_module.so against
#                   Debian's nginx (nginx-dev's /usr/share/nginx/src)
#   make test       unit tests and the Test::Nginx suite (t/)
#   make demo       route sample requests through 4 local backends
#   make NGINX_SRC=/path/to/nginx-1.x.y
#                   build against another nginx source tree; run its tests
#                   with NGINX_BIN=/path/to/that/nginx
#
# "make deps" (run by all the above) installs the Debian packages the build
# and the tests need when one is missing; it needs root for that.

SHELL :=        /bin/bash

NGINX_SRC ?=    /usr/share/nginx/src
NGINX_BIN ?=    /usr/sbin/nginx
BUILD ?=        build
MODULE =        objs/ngx_http_prefix_route_module.so

DEB_PACKAGES =  nginx nginx-dev libxxhash-dev libjansson-dev gcc make \
                libtest-base-perl libtext-diff-perl libwww-perl \
                libnginx-mod-http-echo \
                curl perl

SOURCES =       config ngx_http_prefix_route_module.c \
                $(wildcard src/*.c src/*.h)

# Debian's nginx is built with these; the module uses the same so that it is
# binary-compatible with /usr/sbin/nginx ("nginx -V").
CC_OPT =        -g -O2 -fstack-protector-strong -Wformat \
                -Werror=format-security -fPIC -Wdate-time -D_FORTIFY_SOURCE=2
LD_OPT =        -Wl,-z,relro -Wl,-z,now -fPIC

UNIT_TESTS =    $(patsubst t/unit/%.c,$(BUILD)/unit/%,$(wildcard t/unit/*.c))
UNIT_CFLAGS =   -g -O1 -W -Wall -Wpointer-arith -Wno-unused-parameter -Werror \
                -I $(BUILD)/nginx/src/core -I $(BUILD)/nginx/src/event \
                -I $(BUILD)/nginx/src/os/unix \
                -I $(BUILD)/nginx/objs -I src


.PHONY: all deps test unit-test nginx-test demo clean

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

$(BUILD)/nginx/objs/Makefile: $(NGINX_SRC)/configure config
	rm -rf $(BUILD)/nginx
	mkdir -p $(BUILD)
	cp -r $(NGINX_SRC) $(BUILD)/nginx
	cd $(BUILD)/nginx && \
	flags=(--with-compat); \
	if [ -f conf_flags ]; then . ./conf_flags; flags=("$${NGX_CONF_FLAGS[@]}"); fi; \
	./configure "$${flags[@]}" \
	    --with-cc-opt="$(CC_OPT)" --with-ld-opt="$(LD_OPT)" \
	    --add-dynamic-module=$(CURDIR)

$(NGINX_SRC)/configure:
	@echo "no nginx source at NGINX_SRC=$(NGINX_SRC)"; exit 1

$(MODULE): $(BUILD)/nginx/objs/Makefile $(SOURCES)
	$(MAKE) -C $(BUILD)/nginx -f objs/Makefile modules
	mkdir -p objs
	cp $(BUILD)/nginx/objs/ngx_http_prefix_route_module.so $@

$(BUILD)/unit/%: t/unit/%.c src/*.c src/*.h $(BUILD)/nginx/objs/Makefile
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
nginx-test: all
	@inc="-I t/lib"; \
	if perl -MTest::Nginx::Socket -e 1 2>/dev/null; then inc=""; fi; \
	export TEST_NGINX_BINARY=$(NGINX_BIN); \
	export TEST_NGINX_MODULE=$(CURDIR)/$(MODULE); \
	$(PROVE) $$inc t/ | tee $(BUILD)/nginx-test.log
	@! grep -q '^Result: NOTESTS' $(BUILD)/nginx-test.log

test: unit-test nginx-test

demo: all
	NGINX_BIN=$(NGINX_BIN) bench/demo $(CURDIR)/$(MODULE)

clean:
	rm -rf $(BUILD) objs
