# floodwall - the two front-door commands:
#   make demo   the seed's stories on the embedded memory store (no Redis needed)
#   make test   installs what it needs, builds, and runs every suite (GoogleTest, pytest, node, minitest)
BUILD ?= build
SAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build build-only demo story test test-core test-quick format-check version-check wheels test-sanitizers test-python test-node test-ruby test-e2e bench fuzz soak install format clean

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

# The core and C ABI tests under ASan+UBSan, and the concurrency, Redis, TLS, Sentinel, close and lease tests under TSan (not the Fork
# tests, nor the lease and sentinel ones that fork a client: TSan does not support a child that starts threads after a
# multi-threaded fork, which is what they do).
# ASan skips the one that forks while other threads allocate: GCC 12's ASan does not hold its allocator's
# locks across fork(), so a thread the child starts can hang inside ASan's own allocator (seen with gdb:
# AsanThread::Init -> free -> SizeClassAllocator64 mutex); the plain build runs it. Neither runs the
# overload test (20,000 admits at once must find Redis answering within 50 ms): a sanitizer's slowdown on
# two cores starves Redis for whole deadlines, which the breaker rightly takes for silence.
# Fork.AChildNeverReleasesTheParentsTickets forks while the Redis store's I/O thread runs: its child hung
# once in three ASan runs of make test here (2026-12-07; never in 60 runs alone, never in the plain build),
# most likely the same ASan allocator lock; the plain build runs it. Not yet root-caused (issue #51).
SAN_SKIP = ForkingWhileOtherThreads|AChildNeverReleasesTheParentsTickets|AdmitsBeyondWhatRedisAnswersInTime
test-sanitizers: deps
	cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFW_WERROR=ON -DFW_SANITIZE=address,undefined -DFW_BUILD_BENCH=OFF
	cmake --build $(SAN_BUILD) -j $(JOBS) --target core_tests lease_tests capi_tests c_test
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(SAN_BUILD) --output-on-failure -j $(JOBS) -LE install -E '$(SAN_SKIP)'
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFW_WERROR=ON -DFW_SANITIZE=thread -DFW_BUILD_BENCH=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target core_tests lease_tests capi_tests
	TSAN_OPTIONS=halt_on_error=1 ctest --test-dir $(TSAN_BUILD) --output-on-failure -R 'Concurren|Threads|Redis|Lease|Close|NeverInline|Tls|Acl|Sentinel(Tls)?\.' -E '^Fork\.|Lease.AForkedChild|Sentinel.AForkedChild|$(SAN_SKIP)' -j $(JOBS)

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
