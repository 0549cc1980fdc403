# kevo: `make demo` builds and runs the main job on its embedded default;
# `make test` builds and runs every test. Each installs what it needs first.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# Let ccache share objects between checkouts in different folders (CI clones
# the repository afresh each time): paths are hashed relative to the root.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

.PHONY: deps configure build test test-asan test-tsan demo campaign-demo bench bundle fuzz clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Where bubblewrap cannot start a container (a container without user
# namespaces), the workers the tests start run candidates under seccomp and
# rlimits only, and a note says so (scripts/sandbox_env.sh).
test: build
	@. scripts/sandbox_env.sh && kevo_sandbox_env $(BUILD_DIR)/bin && \
	  cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600 || \
	  { bash $(CURDIR)/scripts/ctest_failures.sh $(abspath $(BUILD_DIR)); exit 8; }

# The tests under AddressSanitizer + UBSan, or ThreadSanitizer, in build-asan/
# or build-tsan/ (scripts/sanitize.sh; docs/fuzzing.md, "Sanitizers").
# SANITIZE_CTEST picks the tests (default: all but gpu, fuzz and fault).
SANITIZE_CTEST ?=
test-asan: build
	@JOBS=$(JOBS) BUILD_DIR=$(BUILD_DIR) bash scripts/sanitize.sh address $(SANITIZE_CTEST)

test-tsan: build
	@JOBS=$(JOBS) BUILD_DIR=$(BUILD_DIR) bash scripts/sanitize.sh thread $(SANITIZE_CTEST)

demo: build
	@bash scripts/demo.sh $(BUILD_DIR)

# A campaign of 10 tasks x cpu and mtia-sim with a model profile (docs/campaigns.md).
campaign-demo: build
	@bash scripts/campaign_demo.sh $(BUILD_DIR)

# The control-plane benchmark (docs/benchmarks.md, "Control plane"): one real
# coordinator, 1,000 synthetic worker streams, 200 jobs; prints its table
# (about 30 s). BENCH_FLAGS adds flags, e.g. "--workers 200 --seconds 30".
bench: build
	@$(BUILD_DIR)/bin/control_plane_bench --task tasks/vector_add $(BENCH_FLAGS)

bundle: build
	@bash scripts/bundle.sh $(BUILD_DIR)

# The fuzz targets under libFuzzer (clang-14, ASan + UBSan) in build-fuzz/,
# FUZZ_SECONDS each (docs/fuzzing.md); `make test` runs them briefly without libFuzzer.
FUZZ_SECONDS ?= 600
fuzz: deps
	@bash scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

clean:
	@rm -rf $(BUILD_DIR)
