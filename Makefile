# Arborist: `make run` opens the workbench, `make test` runs every check.
# Both install what a fresh Debian/Ubuntu machine lacks first.

GO ?= go
BIN := arborist
# System packages the Fyne (OpenGL/X11) build needs; the screenshots target
# installs its own (Xvfb) when it runs.
DEB_PKGS := gcc libc6-dev pkg-config libgl-dev libx11-dev libxcursor-dev \
	libxrandr-dev libxinerama-dev libxi-dev libxxf86vm-dev

.PHONY: run test deps build vet fuzz bench clean package screenshots cuda cuda-toolkit cuda-check cuda-emulate

deps:
	@bash scripts/install-deps.sh $(DEB_PKGS)
	$(GO) mod download

build: deps
	$(GO) build -o $(BIN) .

run: build
	./$(BIN)

vet: deps
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

test: vet
	$(GO) test -count=1 ./...
	# the kernels again on the pure-Go fallback (no cgo kernels, no SIMD)
	$(GO) test -count=1 -tags purego ./kernels/... ./engine/generate
	# and on the portable C kernels (the ones a CPU without AVX2 runs), and
	# the AVX2 ones without AVX-512 VNNI or BF16 (the same as the first run
	# on a CPU without them; the trainer then multiplies in float32), with
	# AVX-VNNI where the CPU has it, and without it
	ARBORIST_SIMD=0 $(GO) test -count=1 ./kernels/...
	ARBORIST_SIMD=1 $(GO) test -count=1 ./kernels/... ./engine/hidden
	ARBORIST_SIMD=1 ARBORIST_AVXVNNI=0 $(GO) test -count=1 ./kernels/cpu
	# arborist serve through the official openai client (Node.js; the npm
	# package pinned in testdata/openai-client, installed there with
	# npm ci when missing): scripts/openai-client-test.sh
	$(GO) build -o $(BIN) .
	bash scripts/openai-client-test.sh ./$(BIN)

# Fuzz every parser and loader for FUZZTIME each (longer: make fuzz
# FUZZTIME=10m). The targets check properties (round trips, re-encoding,
# bounded allocation), not only "no panic". New inputs are minimised for
# at most FUZZMIN so the time goes to fuzzing (FuzzDecode's default 60 s of
# minimising used to eat the whole run); a crasher is still written to
# testdata/fuzz and fails the target. -timeout 0: go test's default 10m
# limit would otherwise end a 10m fuzz run with "context deadline exceeded".
FUZZTIME ?= 30s
FUZZMIN ?= 2s
FUZZ = $(GO) test -run '^$$' -timeout 0 -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMIN)
fuzz:
	$(FUZZ) ./engine/gguf -fuzz '^FuzzParse$$'
	$(FUZZ) ./engine/model -fuzz '^FuzzLoad$$'
	$(FUZZ) ./engine/tokenizer -fuzz '^FuzzRoundTrip$$'
	$(FUZZ) ./profiles/config -fuzz '^FuzzParseConfig$$'
	$(FUZZ) ./engine/hidden -fuzz '^FuzzDecode$$'

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./kernels/... ./engine/...

clean:
	rm -f $(BIN) $(BIN)-cuda $(PTX)
	rm -rf $(STANDIN_BUILD)

# An installable Linux bundle (Arborist.tar.xz: binary, desktop entry, icon,
# and a Makefile whose `make install` puts them in place).
package: deps
	$(GO) install fyne.io/tools/cmd/fyne@v1.7.4
	$$($(GO) env GOPATH)/bin/fyne package --target linux --icon assets/icon.png

# Screenshots of the real window under Xvfb (scripts/screenshots.sh): the
# demo and bench pairs at 1024x640, 1366x768 and 1920x1080, light and dark,
# and small copies for the README; with the packages that needs.
SHOT_PKGS := xvfb imagemagick
screenshots: build
	@bash scripts/install-deps.sh $(SHOT_PKGS)
	bash scripts/screenshots.sh

# CUDA (docs/CUDA.md). `make cuda` puts Debian 12's
# CUDA 11.8 compiler, headers and stub libcuda in a user cache folder
# (scripts/install-cuda.sh: no root, the system untouched), compiles the
# kernels to PTX for Ampere (sm_80) and Hopper (sm_90), and builds
# arborist-cuda: the same program with the CUDA backend linked in (build tag
# cuda). The default binary never links libcuda; asked for --device cuda it
# hands over to arborist-cuda. nvcc 11.8 accepts gcc <= 11; Debian 12's
# gcc 12 works for these kernels with -allow-unsupported-compiler (checked
# by cuda-check, which compiles them to machine code with warnings as
# errors). The PTX is generated, not committed (kernels/cuda/ptx, ignored):
# it is 0.7 MB of compiler output that must match the .cu source exactly,
# and make rebuilds it whenever the source changes.
CUDA_HOME ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/arborist/cuda-11.8
CUDA_ROOT = $(CUDA_HOME)/root
NVCC = $(CUDA_ROOT)/usr/lib/nvidia-cuda-toolkit/bin/nvcc
HOSTCC ?= $(shell command -v gcc)
NVCCFLAGS = -ccbin $(HOSTCC) -allow-unsupported-compiler -std=c++17 -O3 -Werror all-warnings
CUDA_SRC = kernels/cuda/kernels/arborist.cu
CUDA_HDRS = kernels/cuda/kernels/quant.cuh kernels/cuda/kernels/fast.cuh
CUDA_ARCHS = 80 90
PTX = $(CUDA_ARCHS:%=kernels/cuda/ptx/sm_%.ptx)
# The toolkit's headers and stub libcuda reach the C compiler and linker
# through CPATH and LIBRARY_PATH, not CGO_CFLAGS/CGO_LDFLAGS: go hashes the
# CGO_ variables into every cgo package's build ID, so setting them would
# rebuild Fyne, GLFW and SQLite (minutes on 2 cores) instead of reusing
# make test's builds; only gorgonia.org/cu needs them.
CUDA_ENV = CGO_ENABLED=1 CPATH="$(CUDA_ROOT)/usr/include" LIBRARY_PATH="$(CUDA_ROOT)/usr/lib/x86_64-linux-gnu/stubs"
# stripped: the binary travels to GPU machines (scripts/device-check.sh)
CUDA_LDFLAGS ?= -s -w

cuda-toolkit:
	@bash scripts/install-cuda.sh "$(CUDA_HOME)" >/dev/null

kernels/cuda/ptx/sm_%.ptx: $(CUDA_SRC) $(CUDA_HDRS) | cuda-toolkit
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -ptx -arch=sm_$* -o $@ $<

cuda: deps cuda-toolkit $(PTX)
	$(CUDA_ENV) $(GO) build -tags cuda -ldflags="$(CUDA_LDFLAGS)" -o $(BIN)-cuda .

# The stand-in driver (kernels/cuda/standin, docs/CUDA.md): a libcuda.so.1
# on host memory whose launches are counted, so that the backend's host
# path (launches, copies, synchronisations per pass) is measured without a
# GPU, and, with ARBORIST_STANDIN_RUN=1, run on the CPU (standin/emu: the
# kernels' source compiled by g++, a block's threads as fibers), so that
# what they compute is checked without one. Only tests load it, through
# LD_LIBRARY_PATH; arborist-cuda is linked against the toolkit's stub and
# runs on the real driver.
STANDIN_DIR = kernels/cuda/standin
STANDIN_BUILD = $(STANDIN_DIR)/build
STANDIN = $(STANDIN_BUILD)/libcuda.so.1
STANDIN_TEST = $(STANDIN_BUILD)/cuda.test
EMU_DIR = $(STANDIN_DIR)/emu
HOSTCXX ?= $(shell command -v g++)

$(STANDIN_BUILD)/standin.o: $(STANDIN_DIR)/standin.c $(STANDIN_DIR)/standin.h $(EMU_DIR)/emu_run.h | cuda-toolkit
	@mkdir -p $(@D)
	$(HOSTCC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -pthread \
		-I"$(CUDA_ROOT)/usr/include" -c -o $@ $<

$(STANDIN_BUILD)/unsupported.o: $(STANDIN_DIR)/unsupported.c
	@mkdir -p $(@D)
	$(HOSTCC) -std=c11 -O2 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -c -o $@ $<

# the kernels for the host: -ffp-contract=off so that g++ keeps a*b+c as
# two roundings wherever it compiles it, whatever the build
$(STANDIN_BUILD)/kernels.o: $(EMU_DIR)/kernels.cc $(EMU_DIR)/emu.h $(EMU_DIR)/emu_run.h $(CUDA_SRC) $(CUDA_HDRS)
	@mkdir -p $(@D)
	$(HOSTCXX) -std=c++17 -O2 -Wall -Wextra -Werror -Wno-unknown-pragmas -ffp-contract=off -fPIC -fvisibility=hidden \
		-I$(EMU_DIR) -include $(EMU_DIR)/emu.h -c -o $@ $<

$(STANDIN_BUILD)/emu.o: $(EMU_DIR)/emu.cc $(EMU_DIR)/emu.h $(EMU_DIR)/emu_run.h
	@mkdir -p $(@D)
	$(HOSTCXX) -std=c++17 -O2 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -I$(EMU_DIR) -c -o $@ $<

$(STANDIN): $(STANDIN_BUILD)/standin.o $(STANDIN_BUILD)/unsupported.o $(STANDIN_BUILD)/kernels.o $(STANDIN_BUILD)/emu.o
	$(HOSTCXX) -shared -pthread -Wl,-soname,libcuda.so.1 -o $@ $^

# The CUDA compile check CI runs: every kernel compiled to machine code for
# sm_80 and sm_90 with every warning (nvcc's and ptxas's) an error, and
# held to its register budget (scripts/ptxas-budget.sh: no kernel spills,
# the fast path's kernels within kernels/cuda/kernels/ptxas-budget.txt,
# its wide products free of 16-bit loads); the cgo build of arborist-cuda,
# go vet of the cuda-tagged code, and the cuda-tagged tests compiled (they
# need a GPU to run: docs/CUDA.md); the launch budget test of both paths
# run on the stand-in driver; the fast path's tests against the verified
# path run on the stand-in running the kernels on the CPU (-short: a
# minute or two).
cuda-check: cuda $(STANDIN)
	for a in $(CUDA_ARCHS); do $(NVCC) $(NVCCFLAGS) -Xptxas -Werror -Xptxas -v -cubin -arch=sm_$$a -o /dev/null $(CUDA_SRC) \
		>$(STANDIN_BUILD)/ptxas-sm_$$a.log 2>&1 || { cat $(STANDIN_BUILD)/ptxas-sm_$$a.log; exit 1; }; done
	bash scripts/ptxas-budget.sh kernels/cuda/kernels/ptxas-budget.txt kernels/cuda/ptx/sm_90.ptx $(CUDA_ARCHS:%=$(STANDIN_BUILD)/ptxas-sm_%.log)
	$(CUDA_ENV) $(GO) vet -tags cuda ./kernels/cuda/... ./profiles/... ./app/cli/
	$(CUDA_ENV) $(GO) test -tags cuda -c -o $(STANDIN_TEST) ./kernels/cuda
	@nm -D --defined-only $(STANDIN) | awk '{print $$3}' > $(STANDIN_BUILD)/defined
	@missing=$$(nm -D --undefined-only $(STANDIN_TEST) | awk '$$2 ~ /^cu/ {print $$2}' | grep -vxF -f $(STANDIN_BUILD)/defined); \
		test -z "$$missing" || { echo "the stand-in driver lacks what the binding links: $$missing"; exit 1; }
	cd kernels/cuda && LD_LIBRARY_PATH="$(abspath $(STANDIN_BUILD))" $(abspath $(STANDIN_TEST)) -test.run '^TestLaunchBudget$$' -test.v -test.count=1
	cd kernels/cuda && ARBORIST_STANDIN_RUN=1 LD_LIBRARY_PATH="$(abspath $(STANDIN_BUILD))" $(abspath $(STANDIN_TEST)) \
		-test.run '^(TestFastDeviceSuite|TestFastStructure|TestFastMatchesVerified)$$' -test.short -test.count=1
	$(CUDA_ENV) $(GO) test -tags cuda -c -o /dev/null ./profiles
	$(CUDA_ENV) $(GO) test -tags cuda -c -o /dev/null ./engine/model
	$(GO) test -count=1 ./kernels/cuda/...

# Every GPU test of kernels/cuda on the stand-in running the kernels on the
# CPU, on each path: what a GPU run checks of the kernels' results, without
# one (a few minutes; the model-level suites of engine/model and profiles
# take too long there and run on a GPU only, scripts/device-check.sh).
cuda-emulate: cuda $(STANDIN)
	$(CUDA_ENV) $(GO) test -tags cuda -c -o $(STANDIN_TEST) ./kernels/cuda
	cd kernels/cuda && ARBORIST_STANDIN_RUN=1 LD_LIBRARY_PATH="$(abspath $(STANDIN_BUILD))" $(abspath $(STANDIN_TEST)) -test.count=1
	cd kernels/cuda && ARBORIST_CUDA_PATH=fast ARBORIST_STANDIN_RUN=1 LD_LIBRARY_PATH="$(abspath $(STANDIN_BUILD))" $(abspath $(STANDIN_TEST)) -test.count=1
