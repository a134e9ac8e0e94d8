# Included by the Makefile: how the unit tests (t/unit), the fuzzer
# (fuzz/) and the extract bench (bench/extract) are built.

# the stage from body to hashes: the module's, the tests', the fuzzer's
STAGE =         $(addprefix src/ngx_http_prefix_route_,prompt.c hash.c \
                usage.c metrics.c extract.c scan.c) t/unit/lib/ngx_read_file.c
UNIT_CFLAGS =   -g -O1 -W -Wall -Wpointer-arith -Wno-unused-parameter \
                -Werror -I src -I t/unit/lib \
                $(addprefix -I $(NGX_BUILD)/,src/core src/event src/os/unix objs)
UNIT_TESTS =    $(patsubst t/unit/%.c,$(BUILD)/unit/%,$(wildcard t/unit/*.c))
UNIT_LINK =     $(STAGE) src/ngx_http_prefix_route_choice.c -ljansson -lxxhash
# the index test links nginx's own slab, rbtree, shmtx, pools and crc32
NGX_ORIG =      $(BUILD)/nginx-orig/src
# (with kill points between the index's writes: a worker killed there)
INDEX_LINK =    $(addprefix src/ngx_http_prefix_route_,index.c load.c \
                choice.c) t/unit/lib/test_zone.c $(addprefix $(NGX_ORIG)/, \
                core/ngx_slab.c core/ngx_rbtree.c core/ngx_shmtx.c \
                core/ngx_palloc.c core/ngx_string.c core/ngx_crc32.c \
                os/unix/ngx_alloc.c)
$(BUILD)/unit/index_test: UNIT_LINK = $(INDEX_LINK)
$(BUILD)/unit/index_test: UNIT_CFLAGS += -DNGX_HTTP_PREFIX_ROUTE_KILL_POINTS=1
FUZZ_BIN =      $(BUILD)/fuzz/prompt_fuzzer
JANSSON =       $(BUILD)/fuzz/jansson

$(BUILD)/unit/%: t/unit/%.c t/unit/lib/*.c src/*.c src/*.h \
                 $(NGX_BUILD)/objs/Makefile
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_LINK) -lm

$(BUILD)/unit/index_test: $(NGX_ORIG)/core/ngx_slab.c
$(NGX_ORIG)/core/ngx_slab.c:
	t/unit/nginx-source $(BUILD)/nginx-orig $(NGINX_SRC)

# preloaded into nginx by the t/ files that call long_uptime()
$(BUILD)/uptime.so: t/uptime/uptime.c
	@mkdir -p $(@D)
	$(CC) -g -O1 -W -Wall -Werror -shared -fPIC -o $@ $< -ldl

# the mend's cost, with the index's kill points (bench/mend)
$(BUILD)/mend_bench: bench/mend/mend_bench.c $(NGX_ORIG)/core/ngx_slab.c \
                     src/*.c src/*.h t/unit/lib/*
	$(CC) $(subst -O1,-O2,$(UNIT_CFLAGS)) \
	    -DNGX_HTTP_PREFIX_ROUTE_KILL_POINTS=1 -o $@ $< \
	    $(INDEX_LINK) -lm

$(BUILD)/extract_bench: bench/extract/extract_bench.c $(STAGE) src/*.h \
                        $(NGX_BUILD)/objs/Makefile
	$(CC) $(subst -O1,-O2,$(UNIT_CFLAGS)) -o $@ $< $(STAGE) -ljansson -lxxhash

$(FUZZ_BIN): fuzz/prompt_fuzzer.c $(STAGE) src/*.h $(NGX_BUILD)/objs/Makefile \
             $(JANSSON)/build/lib/libjansson.a
	clang $(UNIT_CFLAGS) -fsanitize=fuzzer,address,undefined \
	    -fno-sanitize-recover=all -I $(JANSSON)/build/include -o $@ $< \
	    $(STAGE) $(JANSSON)/build/lib/libjansson.a -lxxhash

$(JANSSON)/build/lib/libjansson.a:
	fuzz/build-jansson $(JANSSON)
