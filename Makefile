# floodwall - the two front-door commands:
#   make demo   the seed's stories on the embedded memory store (no Redis needed)
#   make test   installs what it needs, builds, and runs every suite (GoogleTest, pytest, node, minitest)
BUILD ?= build
SAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build build-only demo story docs test test-core test-quick format-check version-check wheels test-sanitizers test-python test-node test-ruby test-e2e bench fuzz soak install format clean

all: build

deps:
	@bash packaging/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFW_WERROR=ON $(CMAKE_FLAGS)

build: deps build-only

# The build alone, for make test, which installs the dependencies as a stage of its own.
build-only: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@bash examples/demo.sh "$(BUILD)" "$(REDIS)"

# The seed's stories through the core alone, in simulated time (no HTTP, no Python).
story: build
	@$(BUILD)/examples/floodwall_story

# The docs site (MkDocs, pip-installed into build-docs/venv) into site/, warnings as errors, then its links,
# its nav and the policy reference against floodwall.schema.json (packaging/check-docs.sh).
docs:
	@bash packaging/check-docs.sh

# Installs the dependencies, builds, runs every suite, and prints each stage's wall time.
test:
	@bash packaging/test-all.sh "$(BUILD)"

test-core: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The inner loop (about a minute warm, plus the binding's suite): the build, formatting, and the core and
# C ABI tests without the multi-node topologies (Redis Cluster, Sentinel, TLS: their failovers take most of
# test-core's time); BINDING=python, node or ruby adds that binding's suite. make test runs everything.
QUICK_SKIP = Cluster|Sentinel|Tls
test-quick: build
	@$(MAKE) --no-print-directory format-check
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -E '$(QUICK_SKIP)'
	@if [ -n "$(BINDING)" ]; then bash packaging/test-$(BINDING).sh; fi

# The core and C ABI tests under ASan+UBSan and under TSan (packaging/test-sanitizers.sh says which run where).
test-sanitizers: deps
	@SAN_BUILD=$(SAN_BUILD) TSAN_BUILD=$(TSAN_BUILD) JOBS=$(JOBS) bash packaging/test-sanitizers.sh all all

test-python: build
	@bash packaging/test-python.sh

test-node: build
	@bash packaging/test-node.sh

test-ruby: build
	@bash packaging/test-ruby.sh

test-e2e: build
	@bash packaging/test-e2e.sh

# A manylinux wheel in dist/ (libhiredis and OpenSSL bundled by auditwheel repair): installs with no compiler.
wheels:
	@bash packaging/build-wheel.sh

# Every package of the committed tree in dist/ with a manifest (file, platform, size, sha256) and SHA256SUMS:
# a wheel per CPython (each tested), the sdist, the npm package with its prebuilt addon, the gem, and the C
# ABI cross-built for Linux arm64 (tested under qemu), and for musl (Alpine) x86_64 and arm64 with the npm
# package's musl addons (packaging/test-musl.sh: its C ABI suite run first). packaging/build-packages.sh says
# what and how long.
packages:
	@bash packaging/install-deps.sh platforms
	@bash packaging/build-packages.sh

# The cross builds and their suites alone (Linux arm64 under qemu-user-static; x86_64 musl natively and arm64
# musl under qemu, hiredis and OpenSSL built for musl once into build-musl/); long, so not in make test.
test-platforms:
	@bash packaging/install-deps.sh platforms
	@bash packaging/test-cross.sh aarch64-linux-gnu
	@bash packaging/test-musl.sh x86_64-linux-musl
	@FW_MUSL_NODE=0 bash packaging/test-musl.sh aarch64-linux-musl

bench: build
	@bash bench/run.sh "$(BUILD)"

# The libFuzzer targets of fuzz/ (clang, ASan + UBSan, their own build in build-fuzz), FUZZ_SECONDS each;
# any crash, leak or UB fails. CI runs them for 30 s (packaging/test-fuzz.sh).
FUZZ_SECONDS ?= 60
fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash packaging/run-fuzz.sh

# 10 million admits on memory:// and 2 million on a throwaway Redis; fails if RSS grows more than 5% after
# the warm-up or descriptors grow (bench/soak/soak.cpp). CI runs a short one (packaging/test-soak.sh).
soak: build
	@SOAK_MEMORY_ADMITS=10000000 SOAK_REDIS_ADMITS=2000000 bash packaging/test-soak.sh "$(BUILD)"

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX),)

# Every C and C++ file of the project (the generated and the vendored ones are not in git).
FORMAT_FILES = $(shell git ls-files '*.c' '*.cc' '*.cpp' '*.h' '*.hpp')

format:
	clang-format -i $(FORMAT_FILES)

# The version lives in VERSION (packaging/set-version.sh X.Y.Z writes it everywhere); make test checks it.
version-check:
	@bash packaging/check-version.sh

# make test runs it first: a file clang-format would change fails the run, naming the file.
format-check:
	@clang-format --dry-run -Werror $(FORMAT_FILES) && echo "format-check: $(words $(FORMAT_FILES)) files as clang-format writes them"

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(TSAN_BUILD)
