# vipd — see README.md. Targets a newcomer needs: `make demo`, `make test`.
SHELL   := /bin/bash
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
BIN     := bin

.PHONY: all deps build test test-unit test-race test-bench-smoke lint demo bench clean

all: build

# Everything the tests need from the network: Go modules. (Debian packages,
# when a test starts to need one, are installed here with apt-get.)
deps:
	$(GO) mod download

build: deps
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN)/vipd ./cmd/vipd

# Unit tests (the fuzz seed corpora under */testdata/fuzz run as part of
# them), the race detector, and a one-iteration run of every benchmark so
# none rots. Privileged tests (network namespaces, AF_XDP) run when make is
# run as root and skip with a message otherwise.
test: deps lint test-unit test-race test-bench-smoke

test-unit:
	$(GO) test -count=1 -timeout 10m ./...

test-race:
	$(GO) test -count=1 -race -short -timeout 10m ./...

test-bench-smoke:
	$(GO) test -count=1 -short -run '^$$' -bench . -benchtime=1x -timeout 10m ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

demo: build
	@echo "make demo: the dataplane (issue 6) and the namespace test bed (issue 8) are not built yet."
	@echo "What exists today is the configuration layer; here is the example config it validates:"
	@echo
	@$(BIN)/vipd -check -config config.toml.example
	@echo
	@echo "No traffic was sent: there is no forwarding yet."
	@exit 1

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf $(BIN)
	$(GO) clean -testcache
