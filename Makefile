GO      ?= go
BIN     ?= bin/etcd-nomad
DEMO_DIR ?= .demo
# Packages whose code starts goroutines run under the race detector.
RACE_PKGS = ./task/... ./coord/... ./local/... ./status/... ./provider/...

.PHONY: build test unit vet fmt demo demo-down clean

build:
	$(GO) build -o $(BIN) ./cmd/etcd-nomad

vet:
	$(GO) vet ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## test: everything — formatting, vet, unit, invariant and integration tests.
test: fmt vet build
	$(GO) test -count=1 -timeout 40m ./...
	$(GO) test -count=1 -race -short -timeout 20m $(RACE_PKGS)

unit:
	$(GO) test -count=1 -short ./...

## demo: a 3-member cluster on this machine; Ctrl-C stops it.
demo: build
	$(BIN) local up -size 3 -dir $(DEMO_DIR)

demo-down:
	$(BIN) local down -dir $(DEMO_DIR)

clean:
	rm -rf bin $(DEMO_DIR)
