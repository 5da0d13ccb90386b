# chartpin — see README.md. `make demo` and `make test` are the two commands
# a newcomer needs; the rest are for CI and releases.
GO      ?= go
BIN     ?= bin/chartpin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build demo test race bench e2e vet fmt

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/chartpin

demo: build
	./$(BIN) demo

vet:
	$(GO) vet ./...

test: vet
	$(GO) test -count=1 ./...

race:
	$(GO) test -race -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1x ./...

fmt:
	gofmt -w $$(git ls-files '*.go')
