# chartpin — see README.md. `make demo` and `make test` are the two commands
# a newcomer needs; the rest are for CI and releases.
GO      ?= go
BIN     ?= bin/chartpin
IMAGE   ?=
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build demo test race bench e2e vet image kube-apiserver mutation fleet

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/chartpin

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

# Builds kube-apiserver from the Go module proxy once per machine and prints its path.
kube-apiserver:
	@hack/kube-apiserver/build.sh

# Fleet simulation: 1000 edges (fake clientsets) ticking through the real
# reconcile against Debian's docker-registry behind a rate-limiting proxy, with
# and without a pull-through mirror and spread ticks. About 5 minutes.
fleet:
	CHARTPIN_FLEET=1 $(GO) test -run '^$$' -bench Fleet -benchtime 1x -timeout 30m -v ./reconcile/
