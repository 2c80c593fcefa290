# mlxcel build. `make` builds build/mlxcel; `make test` runs every test and
# ends with "N passed, N failed". Debian packages are installed when missing.
CC      ?= gcc
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c17 -Wall -Wextra -pthread -fno-strict-aliasing
# Open MPI (src/dist/): its flags are asked of pkg-config when used (recursive
# variables), so a fresh machine's `make` reads them after deps installed it
MPI_CFLAGS = $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   = $(shell pkg-config --libs ompi-c 2>/dev/null || echo -lmpi)
LDLIBS   = -ljansson -lpcre2-8 -lutf8proc -lmicrohttpd -lcurl -lcrypto -lpng -ljpeg -lwebpdemux -lwebp -lsndfile -lvorbisfile -lopusfile -lmpg123 -lsoxr $(MPI_LIBS) -lz -lm -lpthread
BUILD   ?= build
comma   := ,
# build with every core unless the caller chose -j (sub-makes share the jobserver)
ifeq ($(MAKELEVEL),0)
ifeq (,$(filter -j%,$(MAKEFLAGS)))
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif
endif
# whole archive: family and weight-format files register themselves from constructors
WHOLE_LIB = -Wl,--whole-archive $(BUILD)/libmlxcel.a -Wl,--no-whole-archive
# Every object is compiled once, position-independent with hidden symbols:
# the static archive (CLI, tests, tools) and build/libmlxcel.so are linked
# from the same objects, and the .so exports only what include/mlxcel.h
# marks MLXCEL_API (the mlxcel_* functions).
VIS     := -fPIC -fvisibility=hidden
# what the objects are compiled with, expanded here: target-specific
# additions (main.o's commit, audio.o's include) are not in it
FLAGS_DESC := $(CC) $(CFLAGS) $(VIS)

SIMD_AVX2   := -mavx2 -mfma -mf16c
SIMD_AVX512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16

LIB_SRC  := $(sort $(wildcard src/*/*.c))
LIB_SRC  := $(filter-out src/cli/%,$(LIB_SRC))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)

DEB_PKGS := libjansson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev libcurl4-openssl-dev libssl-dev libpng-dev libjpeg62-turbo-dev libwebp-dev libsndfile1-dev libvorbis-dev libopusfile-dev libmpg123-dev libsoxr-dev zlib1g-dev pkg-config openmpi-bin libopenmpi-dev

.PHONY: all deps test test-deps unit asan clean fuzz demo
all: deps $(BUILD)/mlxcel $(BUILD)/libmlxcel.so

# Installs the Debian -dev packages that are missing (no-op when present).
deps:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; fi

# SIMD_NOSAN: flags the SIMD kernels are built without (the fuzz library's
# sanitizers: UBSan makes clang take minutes on one kernel file)
$(BUILD)/%_avx2.o: %_avx2.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(filter-out $(SIMD_NOSAN),$(CFLAGS)) $(VIS) $(SIMD_AVX2) -MMD -MP -c $< -o $@
$(BUILD)/src/quant/qvnni_vbmi_avx512.o: SIMD_AVX512 += -mavx512vbmi
$(BUILD)/%_avx512.o: %_avx512.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(filter-out $(SIMD_NOSAN),$(CFLAGS)) $(VIS) $(SIMD_AVX512) -MMD -MP -c $< -o $@
# opusfile.h includes <opus_multistream.h> from the opus include folder
$(BUILD)/src/audio/audio.o: override CFLAGS += -I/usr/include/opus
# only src/dist/ includes <mpi.h>
$(BUILD)/src/dist/%.o: override CFLAGS += $(MPI_CFLAGS)
$(BUILD)/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(VIS) -MMD -MP -c $< -o $@

$(BUILD)/libmlxcel.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Objects are rebuilt when the flags they are compiled with change (VIS
# above, OPT, CC): the stamp is rewritten only then.
$(LIB_OBJ) $(CLI_OBJ): $(BUILD)/flags.stamp
$(BUILD)/flags.stamp: FORCE
	@mkdir -p $(BUILD); echo '$(FLAGS_DESC)' | cmp -s - $@ || echo '$(FLAGS_DESC)' > $@

# The shared library: the public C API (include/mlxcel.h, src/api/), linked
# from the archive's objects (all of them: constructors register families).
$(BUILD)/libmlxcel.so: $(LIB_OBJ) src/api/mlxcel.map
	$(CC) $(CFLAGS) -shared -Wl,-soname,libmlxcel.so -Wl,-z,defs -Wl,--version-script,src/api/mlxcel.map -o $@ $(LIB_OBJ) $(LDLIBS)

# --version: the git commit and the flags of this build; main.o is rebuilt
# when they change (the stamp is rewritten only then).
GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
BUILD_DESC := $(CC) $(CFLAGS) $(VIS)
$(BUILD)/src/cli/main.o: CFLAGS += -DMX_GIT_COMMIT='"$(GIT_COMMIT)"' -DMX_BUILD_FLAGS='"$(BUILD_DESC)"'
$(BUILD)/src/cli/main.o: $(BUILD)/version.stamp
$(BUILD)/version.stamp: FORCE
	@mkdir -p $(BUILD); echo '$(GIT_COMMIT) $(BUILD_DESC)' | cmp -s - $@ || echo '$(GIT_COMMIT) $(BUILD_DESC)' > $@
FORCE:

$(BUILD)/mlxcel: $(CLI_OBJ) $(BUILD)/libmlxcel.a
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(WHOLE_LIB) $(LDLIBS)
	ln -sf mlxcel $(BUILD)/mlxcel-server

$(BUILD)/tests/%: tests/unit/%.c tests/unit/test.h $(BUILD)/libmlxcel.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc -o $@ $< $(WHOLE_LIB) $(LDLIBS)

unit: $(TEST_BIN) $(BUILD)/tests/dist_fixtures

# Sanitizer build of the library and unit tests, in its own build tree.
asan: deps
	$(MAKE) BUILD=build/asan OPT=-O1 CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" unit $(BUILD)/asan/mlxcel

# Test-only tools: node/npm (server tests drive the official openai npm
# client), python3 (a few CLI tests, the imitation hub) and tmux (the chat
# terminal test); installed from Debian when absent.
test-deps:
	@missing=""; command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	command -v python3 >/dev/null 2>&1 || missing="$$missing python3"; \
	command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; fi

test: all unit asan fuzz test-deps
	@bash tests/tokenizers/fetch.sh >/dev/null || echo "warning: tests/tokenizers/fetch.sh failed; the gemma3 goldens will fail"
	@bash tests/run.sh

# The main job: a generation on the small chat model the repo ships (random
# weights of the llama fixture + a test tokenizer and ChatML template).
demo: all
	@rm -rf $(BUILD)/demo-model && mkdir -p $(BUILD)/demo-model
	@cp tests/server/tinymodel/*.json tests/fixtures/llama/model.safetensors $(BUILD)/demo-model/
	$(BUILD)/mlxcel generate -m $(BUILD)/demo-model -p "Hello, who are you?" -n 32
	@echo ""
	@echo "That was a 2-layer Llama with random weights (tests/fixtures/llama), so the text is noise: the"
	@echo "point is that the whole path ran (tokenizer, chat template, prefill, sampling, streaming)."
	@echo "Next, with a real model (any folder from the Hugging Face hub, or its id):"
	@echo "  $(BUILD)/mlxcel chat -m Qwen/Qwen3-0.6B                 # downloads it into ~/.cache/huggingface"
	@echo "  $(BUILD)/mlxcel generate -m mlx-community/Llama-3.2-1B-Instruct-4bit -p \"Write a haiku about C\""
	@echo "  $(BUILD)/mlxcel serve -m Qwen/Qwen3-0.6B --port 8080      # OpenAI API at http://127.0.0.1:8080/v1"
	@echo "  $(BUILD)/mlxcel help                                     # every command; mlxcel help CMD for one"

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

# Tools: random-weight benchmark checkpoints and the kernel microbenchmark.
$(BUILD)/mkmodel: tools/mkmodel.c $(BUILD)/libmlxcel.a
	$(CC) $(CFLAGS) -Isrc -o $@ $< $(WHOLE_LIB) $(LDLIBS)
$(BUILD)/kbench: tools/kbench.c $(BUILD)/libmlxcel.a
	$(CC) $(CFLAGS) -Isrc -o $@ $< $(WHOLE_LIB) $(LDLIBS)
$(BUILD)/kv_bench: tools/kv_bench.c $(BUILD)/libmlxcel.a
	$(CC) $(CFLAGS) -Isrc -o $@ $< $(WHOLE_LIB) $(LDLIBS)
$(BUILD)/qcold: tools/qcold.c $(BUILD)/libmlxcel.a
	$(CC) $(CFLAGS) -Isrc -o $@ $< $(WHOLE_LIB) $(LDLIBS)
$(BUILD)/isa_bounds: tools/isa_bounds.c $(BUILD)/libmlxcel.a
	$(CC) $(CFLAGS) -Isrc -o $@ $< $(WHOLE_LIB) $(LDLIBS)
all: $(BUILD)/mkmodel

# libFuzzer targets (fuzz/fuzz_*.c), built with clang, ASan/UBSan and
# -fsanitize=fuzzer against one clang ASan/UBSan build of the library
# (build/fuzzlib, kept up to date by its own make: built once, shared by all
# targets; fuzz_model, fuzz_http and fuzz_image take the whole archive for
# the families' and image processors' constructors). `make test` runs each
# for a few seconds from the committed seeds (tests/cli/fuzz.sh); a longer
# run, e.g.:
#   build/fuzz/fuzz_tokenizer -max_total_time=180 fuzz/corpus-tokenizer fuzz/seeds-tokenizer
# (from the repo root; docs/fuzzing.md has each target's seeds and flags)
FUZZ_WHOLE  := fuzz_model fuzz_http fuzz_image
FUZZ_BIN    := $(addprefix build/fuzz/,$(basename $(notdir $(sort $(wildcard fuzz/fuzz_*.c)))))
FUZZ_CFLAGS := -std=c17 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZLIB_OPT := -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -fsanitize=fuzzer-no-link
# the SIMD kernels without ASan/UBSan (coverage still): clang spent 215 s of CPU on
# qvnni_avx512.c with them, 7 s without; `make asan` (gcc) checks the kernels' tests
FUZZLIB_NOSAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
.PHONY: FORCE fuzz-deps
fuzz: $(FUZZ_BIN)
# clang and its sanitizer and libFuzzer runtimes, from Debian when absent
fuzz-deps: deps
	@command -v clang >/dev/null 2>&1 || { echo "installing: clang libclang-rt-dev"; SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq clang libclang-rt-dev >/dev/null; }
build/fuzz/%: fuzz/%.c build/fuzzlib/libmlxcel.a $(wildcard src/*/*.h)
	@mkdir -p build/fuzz
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -Isrc -o $@ $< $(if $(filter $*,$(FUZZ_WHOLE)),-Wl$(comma)--whole-archive build/fuzzlib/libmlxcel.a -Wl$(comma)--no-whole-archive,build/fuzzlib/libmlxcel.a) $(LDLIBS)
ifneq ($(BUILD),build/fuzzlib)
# its own make decides what to rebuild; the archive's time stamp then tells ours
build/fuzzlib/libmlxcel.a: FORCE | fuzz-deps
	@$(MAKE) --no-print-directory CC=clang BUILD=build/fuzzlib OPT="$(FUZZLIB_OPT)" SIMD_NOSAN="$(FUZZLIB_NOSAN)" build/fuzzlib/libmlxcel.a
endif

# embed_bench: embeddings/s of an encoder checkpoint through the library API
# (docs/embed-bench.md; the MiniLM-shaped checkpoint comes from mkmodel).
$(BUILD)/embed_bench: tools/embed_bench.c $(BUILD)/libmlxcel.a
	$(CC) $(CFLAGS) -Isrc -o $@ $< $(WHOLE_LIB) $(LDLIBS)

# grammar_bench: constrained decoding's cost per token against the decode
# step (BENCHMARKS.md, "Constrained decoding").
$(BUILD)/grammar_bench: tools/grammar_bench.c $(BUILD)/libmlxcel.a
	$(CC) $(CFLAGS) -Isrc -o $@ $< $(WHOLE_LIB) $(LDLIBS)
