# Included by the Makefile: make ... ASAN=1.
# ASAN=1: the module (and an NGINX_SRC nginx) built with AddressSanitizer,
# nginx run with its runtime preloaded (t/tools/asan-nginx)
REAL_NGINX :=   $(NGINX_BIN)
ifeq ($(ASAN),1)
NGX_BUILD :=    $(NGX_BUILD)-asan
MODULE =        objs/ngx_http_prefix_route_module-asan.so
CC_OPT +=       -fsanitize=address -fno-omit-frame-pointer
LD_OPT +=       -fsanitize=address
override NGINX_BIN := $(CURDIR)/t/tools/asan-nginx
export ASAN_NGINX := $(abspath $(REAL_NGINX))
export ASAN_LOG_DIR := $(CURDIR)/$(BUILD)/asan-log
export TEST_NGINX_ASAN = 1
endif
