# Arborist: `make run` opens the workbench, `make test` runs every check.
# Both install what a fresh Debian/Ubuntu machine lacks first.

GO ?= go
BIN := arborist
# System packages the Fyne (OpenGL/X11) build needs; the screenshots target
# installs its own (Xvfb) when it runs.
DEB_PKGS := gcc libc6-dev pkg-config libgl-dev libx11-dev libxcursor-dev \
	libxrandr-dev libxinerama-dev libxi-dev libxxf86vm-dev

.PHONY: run test deps build vet fuzz bench clean package screenshots

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
	# and on the portable C kernels (the ones a CPU without AVX2 runs)
	ARBORIST_SIMD=0 $(GO) test -count=1 ./kernels/...

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
	$(FUZZ) ./profiles -fuzz '^FuzzParseConfig$$'
	$(FUZZ) ./engine/hidden -fuzz '^FuzzDecode$$'

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./kernels/... ./engine/...

clean:
	rm -f $(BIN)

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
