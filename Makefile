# A thin driver for CMake: `make run` and `make test` set everything up on a
# fresh Debian machine (installing missing packages when run as root).

BUILD ?= build
CMAKE_FLAGS ?=
SOCKET ?= $(abspath $(BUILD))/run/io.cudackpt.Process
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# Debian packages the build and the tests need: all of them.  The CUDA
# Toolkit is not needed (include-private/cuda-api.h declares the driver API
# the project uses); where it is found, the build checks those declarations
# against its cuda.h and builds the GPU test programs with its nvcc.
# munge, slurmctld, slurmd and slurm-client are for the test cluster of the
# slurm.* tests (tests/slurm: about 3.5 MB to fetch, 13 MB installed, 16 s
# to install); the cluster uses none of their system configuration, and
# Debian's slurmctld and slurmd services start only once /etc/slurm/slurm.conf
# exists.
DEB_PACKAGES = cmake make gcc pkg-config libuv1-dev libcjson-dev libsystemd-dev check systemd podman runc busybox-static python3-yaml python3-prometheus-client python3-pytest python3-venv python3-pip python3-setuptools python3-wheel clang libbpf-dev libmicrohttpd-dev libseccomp-dev libxxhash-dev libzstd-dev libarchive-dev munge slurmctld slurmd slurm-client

.PHONY: all deps configure build run test check-sanitize check-no-toolkit bench bench-sim clean install fuzz

all: build

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "Installing:$$missing"; \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
		else \
			echo "Missing Debian packages. Run:"; \
			echo "  sudo apt-get install -y$$missing"; \
			exit 1; \
		fi; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Starts the daemon in the foreground on a socket under the build tree,
# having built only what it runs: the daemon, the client the README uses and
# the simulator.  On a machine without a loadable CUDA driver it runs on the
# simulator, and says so; the simulator shows SIM_GPUS GPUs, so that a
# restore onto another GPU can be tried (docs/python.md).
RUN_TARGETS = cudackptd cudackptctl cudackpt-sim
SIM_GPUS ?= 2
run: configure
	cmake --build $(BUILD) -j$(JOBS) --target $(RUN_TARGETS)
	@mkdir -p $(BUILD)/run
	@if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then \
		driver=libcuda.so.1; \
	else \
		driver=$(abspath $(BUILD))/tests/sim/libcudackpt-sim.so; \
		echo "*** No CUDA driver here: starting on the SIMULATED driver ($$driver), $(SIM_GPUS) GPUs ***"; \
		export CUDACKPT_SIM_DEVICE_COUNT=$(SIM_GPUS); \
	fi; \
	echo "Socket: $(SOCKET)  (try: CUDACKPT_SOCKET=$(SOCKET) $(BUILD)/client/cudackptctl info)"; \
	exec $(BUILD)/daemon/cudackptd --socket=$(SOCKET) --driver=$$driver

# The process index's tests need tracefs where the kernel has no BPF
# trampolines (systemd mounts it at boot; a bare machine may not have).
# It ends with one line per skipped test, and per test skipped within a
# suite that ran, with the reason it gave (tests/skipped.py, from ctest's
# JUnit file), then the count.
test: build
	@if [ "$$(id -u)" = 0 ] && [ -d /sys/kernel/tracing ] && ! mountpoint -q /sys/kernel/tracing; then \
		mount -t tracefs nodev /sys/kernel/tracing || true; fi
	@cd $(BUILD) && rc=0 && ctest --output-on-failure --timeout 600 --output-junit ctest-junit.xml || rc=$$?; \
		python3 $(CURDIR)/tests/skipped.py $(abspath $(BUILD))/ctest-junit.xml; exit $$rc

# The whole suite under ASan+UBSan, then the scheduling tests under TSan.
check-sanitize: deps
	cmake -S . -B $(BUILD)-asan -DCUDACKPT_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build $(BUILD)-asan -j$(JOBS)
	cd $(BUILD)-asan && ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		ctest --output-on-failure --timeout 900
	cmake -S . -B $(BUILD)-tsan -DCUDACKPT_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build $(BUILD)-tsan -j$(JOBS)
	cd $(BUILD)-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
		ctest --output-on-failure --timeout 900 -L tsan

# As on a machine without the CUDA Toolkit: a build in $(BUILD)-notoolkit
# with every Toolkit directory and nvcc hidden in a mount namespace (root),
# then the whole suite (`make test`) there.
check-no-toolkit: deps
	.ci/without-toolkit $(BUILD)-notoolkit --full

# libFuzzer on the daemon's request path (tests/fuzz/): a clang build with
# ASan+UBSan in $(BUILD)-fuzz, run for FUZZ_SECONDS from the seed corpus;
# new inputs go to $(BUILD)-fuzz/corpus, findings to $(BUILD)-fuzz/findings
# (replay one: $(BUILD)-fuzz/tests/fuzz/fuzz-replay FILE).  Needs clang.
FUZZ_SECONDS ?= 60
FUZZ_FLAGS ?=
FUZZ_PACKAGES = clang libclang-rt-14-dev
fuzz: deps
	@missing=""; \
	for p in $(FUZZ_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
		else \
			echo "Missing Debian packages. Run:"; echo "  sudo apt-get install -y$$missing"; exit 1; \
		fi; \
	fi
	CC=clang cmake -S . -B $(BUILD)-fuzz -DCUDACKPT_FUZZ=ON -DCUDACKPT_SANITIZE=address,undefined $(CMAKE_FLAGS)
	cmake --build $(BUILD)-fuzz -j$(JOBS) --target fuzz-request fuzz-replay
	@mkdir -p $(BUILD)-fuzz/corpus $(BUILD)-fuzz/findings
	cd $(BUILD)-fuzz && ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		./tests/fuzz/fuzz-request -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=30 \
		-close_fd_mask=2 -print_final_stats=1 -dict=$(abspath tests/fuzz/varlink.dict) \
		-artifact_prefix=findings/ $(FUZZ_FLAGS) corpus $(abspath tests/fuzz/corpus)

bench: build
	cmake --build $(BUILD) --target bench

bench-sim: build
	cmake --build $(BUILD) --target bench-sim

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-notoolkit
