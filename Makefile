GO      ?= go
BIN     ?= bin/etcd-nomad
# Packages whose code starts goroutines run under the race detector.
RACE_PKGS = ./task/... ./coord/... ./local/...

.PHONY: build test unit race vet fmt demo demo-down clean

build:
	$(GO) build -o $(BIN) ./cmd/etcd-nomad

vet:
	$(GO) vet ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## test: everything — formatting, vet, unit, invariant and integration tests.
test: fmt vet build
	$(GO) test -count=1 -timeout 40m ./...
	$(GO) test -count=1 -race -timeout 20m $(RACE_PKGS)

unit:
	$(GO) test -count=1 -short ./...

clean:
	rm -rf bin
