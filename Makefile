# clusterrebootd — build, test, lint, demo.
# `make demo` runs the local demo cluster; `make test` is the test command CI runs.

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -buildid= -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN       := bin
ETCD_BIN  := $(CURDIR)/$(BIN)/etcd
ETCDCTL_BIN := $(CURDIR)/$(BIN)/etcdctl
FUZZTIME  ?= 5s
E2E_CHAOS_RUNS ?= 0
CHAOS_RUNS ?= 40
export CGO_ENABLED = 0

.PHONY: all build test unit fuzz lint demo bench clean etcd e2e verify-units package package-test release man etcdctl chaos bench-fleet

all: build

## build: static, trimmed, version-stamped binary in bin/clusterrebootd
build:
	$(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)' -o $(BIN)/clusterrebootd ./cmd/clusterrebootd

## etcdctl: etcdctl from its Go module, for the reference health gate's tests
etcdctl: $(ETCDCTL_BIN)
$(ETCDCTL_BIN): hack/go.mod hack/go.sum hack/etcdctl/main.go
	cd hack && $(GO) build -trimpath -o $(ETCDCTL_BIN) ./etcdctl

## man: manual page and shell completions generated from the command line, in bin/ (as packaged)
man: build
	@mkdir -p $(BIN)/completions
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) $(BIN)/clusterrebootd gen-docs man > $(BIN)/clusterrebootd.8
	$(BIN)/clusterrebootd gen-docs bash > $(BIN)/completions/clusterrebootd
	$(BIN)/clusterrebootd gen-docs zsh > $(BIN)/completions/_clusterrebootd
	$(BIN)/clusterrebootd gen-docs fish > $(BIN)/completions/clusterrebootd.fish

## etcd: the real etcd server built from its Go module (hack/ module) for tests
etcd: $(ETCD_BIN)
$(ETCD_BIN): hack/go.mod hack/go.sum hack/etcd/main.go
	cd hack && $(GO) build -trimpath -o $(ETCD_BIN) ./etcd

## test: lint, unit + integration tests with the race detector, short fuzzing
test: lint etcd etcdctl build unit fuzz

unit:
	CGO_ENABLED=1 CLUSTERREBOOTD_ETCD_BIN=$(ETCD_BIN) CLUSTERREBOOTD_ETCDCTL_BIN=$(ETCDCTL_BIN) $(GO) test -race -count=1 -timeout 20m ./...
	cd hack && CGO_ENABLED=1 $(GO) test -race -count=1 ./provenance/ ./nfdelay/

# Every fuzz target runs for $(FUZZTIME); the corpus in testdata/fuzz is replayed by `unit`.
fuzz:
	@set -e; for pkg in $$($(GO) list ./lib/...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; \
	    log=$$(mktemp); \
	    if ! $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg >$$log 2>&1; then \
	      grep -v '^fuzz: elapsed' $$log | tail -40; \
	      echo "fuzz $$f failed; running it once more (a crasher found above fails again: it is replayed first)"; \
	      $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg >$$log 2>&1 || { grep -v '^fuzz: elapsed' $$log | tail -40; rm -f $$log; exit 1; }; \
	    fi; \
	    rm -f $$log; \
	  done; \
	done

## lint: gofmt, go vet, and the import-arrow test of DESIGN §8
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/
	cd hack && $(GO) vet ./...
	$(GO) test -count=1 ./test/arch/

## verify-units: systemd-analyze verify/security of units/ (no systemd PID 1 needed)
verify-units: build
	CLUSTERREBOOTD_BIN=$(CURDIR)/$(BIN)/clusterrebootd hack/e2e/verify-units.sh

## e2e: nspawn nodes with real systemd + logind, a 3-member etcd, real reboots (root)
e2e: build etcd verify-units
	CLUSTERREBOOTD_BIN=$(CURDIR)/$(BIN)/clusterrebootd CLUSTERREBOOTD_ETCD_BIN=$(ETCD_BIN) E2E_CHAOS_RUNS=$(E2E_CHAOS_RUNS) \
	  $(GO) test -tags e2e -count=1 -v -timeout 25m ./test/e2e/

## chaos: the fault matrix on the nspawn harness (root); CHAOS_RUNS=40 covers every combination once (~30-45 min)
chaos: build etcd
	CLUSTERREBOOTD_BIN=$(CURDIR)/$(BIN)/clusterrebootd CLUSTERREBOOTD_ETCD_BIN=$(ETCD_BIN) E2E_CHAOS_RUNS=$(CHAOS_RUNS) \
	  $(GO) test -tags e2e -count=1 -v -timeout 150m -run '^TestChaos$$' ./test/e2e/

## demo: local 5-node demo cluster on an embedded etcd (no root, no systemd)
demo: build
	cd hack && $(GO) run ./demo -binary $(CURDIR)/$(BIN)/clusterrebootd

## bench: handover (K = 1…1000), the etcd watch path, rollout vs polling (~14 min), the idle tick
bench: build etcd
	CLUSTERREBOOTD_ETCD_BIN=$(ETCD_BIN) $(GO) test -run '^$$' -bench 'Handover|WatchStartRevision' -benchtime 3x -timeout 60m ./cmd/clusterrebootd/
	CLUSTERREBOOTD_ETCD_BIN=$(ETCD_BIN) CLUSTERREBOOTD_BENCH_REBOOT=2s CLUSTERREBOOTD_BENCH_POLL=2s $(GO) test -run '^$$' -bench Rollout -benchtime 1x -timeout 60m ./cmd/clusterrebootd/
	CLUSTERREBOOTD_ETCD_BIN=$(ETCD_BIN) $(GO) test -run '^$$' -bench '^BenchmarkTick$$' -benchtime 300x ./cmd/clusterrebootd/
	cd hack && $(GO) run ./bench/tick -binary $(CURDIR)/$(BIN)/clusterrebootd -n 200 -runs 3

## bench-fleet: 1000 simulated nodes on one etcd, a wave of 100 reboots, status (~7 min)
bench-fleet: build etcd
	CLUSTERREBOOTD_ETCD_BIN=$(ETCD_BIN) CLUSTERREBOOTD_BIN=$(CURDIR)/$(BIN)/clusterrebootd $(GO) test -v -run '^$$' -bench Fleet -benchtime 1x -timeout 60m ./cmd/clusterrebootd/

# Packages use the same version stamp and linker flags as `build`.
PKG_ENV = GO='$(GO)' VERSION='$(VERSION)' COMMIT='$(COMMIT)' LDFLAGS='$(LDFLAGS)'

## package: deb and rpm for amd64 and arm64 in dist/ (nfpm pinned in hack/go.mod; unsigned, reproducible)
package:
	$(PKG_ENV) hack/package/build.sh

## package-test: reproducibility, lintian, rpmlint, contents, rpm --root, chroot and booted-node life cycle (root)
package-test:
	$(PKG_ENV) hack/package/test.sh

## release: signed packages, SHA256SUMS(.asc), CycloneDX SBOMs in dist/release (SIGNING_KEY, GNUPGHOME)
release:
	$(PKG_ENV) hack/package/release.sh

clean:
	rm -rf $(BIN) dist
