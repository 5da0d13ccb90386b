# chartpin — see README.md. `make demo` and `make test` are the two commands
# a newcomer needs; the rest are for CI and releases.
GO      ?= go
BIN     ?= bin/chartpin
IMAGE   ?=
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# urfave_cli_no_docs drops the Markdown/man generator chartpin never runs.
TAGS    := urfave_cli_no_docs
DIST    ?= dist
# Reproducible builds date the SBOM by the commit, never by the clock.
export SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

.PHONY: build demo test race bench e2e vet image dist dist-check release-prep kube-apiserver mutation fleet

build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -tags $(TAGS) -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/chartpin

demo: build
	./$(BIN) demo

vet:
	$(GO) vet ./...

# Every test: the packages, then the end-to-end release path. Integration
# tests use Debian's docker-registry, etcd and git, and $KUBE_APISERVER (see
# kube-apiserver).
test: vet
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /e2e$$)
	$(MAKE) e2e

# The whole path in one test (pin, PR, publish, upgrade, reconcile), logging
# each step's figures.
e2e:
	$(GO) test -count=1 -v -run . ./e2e/

# One-line breaks of the safety checks (hack/mutation/breaks.txt); each must
# make a test fail. CI runs it after the tests.
mutation:
	hack/mutation/run.sh

race:
	$(GO) test -race -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1x ./...

# The chartpin image (linux/amd64 + linux/arm64, non-root, static) as an OCI
# layout in bin/image-oci, built without a Docker engine; IMAGE=REF pushes it too.
image:
	$(GO) run ./cmd/chartpin-image --version $(VERSION) --layout bin/image-oci $(if $(IMAGE),--push $(IMAGE))

# The release in $(DIST): static binaries for linux, darwin and windows on
# amd64 and arm64, chartpin.spdx.json, SHA256SUMS and the image as an OCI
# layout ($(DIST)/image). Byte-identical for the same commit and Go.
dist:
	rm -rf $(DIST)
	$(GO) run ./cmd/chartpin-dist --version $(VERSION) --out $(DIST)

# Builds the whole release twice and compares every byte.
dist-check:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(MAKE) --no-print-directory dist DIST=$$tmp/a && \
	$(MAKE) --no-print-directory dist DIST=$$tmp/b && \
	diff -r $$tmp/a $$tmp/b && echo "dist-check: two builds of $(VERSION) are byte-identical"

# The release commit for VERSION=vX.Y.Z: the binaries' checksums go into
# install/ (the action and the Helm plugin install only a binary matching
# them) and the plugin version follows. Commit, then tag that commit.
release-prep: dist
	grep -v ' chartpin.spdx.json$$' $(DIST)/SHA256SUMS > install/SHA256SUMS
	echo $(VERSION) > install/VERSION
	sed -i 's/^version: .*/version: "$(patsubst v%,%,$(VERSION))"/' plugin.yaml

# Builds kube-apiserver from the Go module proxy once per machine and prints its path.
kube-apiserver:
	@hack/kube-apiserver/build.sh

# Fleet simulation: 1000 edges (fake clientsets, each its own client address)
# ticking through the real reconcile against Debian's docker-registry behind a
# per-client rate limit, with and without a pull-through mirror (with a tag
# cache TTL) and spread ticks. About 5 minutes; CHARTPIN_FLEET_EDGES=50 for a
# quick look.
fleet:
	CHARTPIN_FLEET=1 $(GO) test -run '^$$' -bench Fleet -benchtime 1x -timeout 30m -v ./reconcile/
