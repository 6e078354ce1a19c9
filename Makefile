GO ?= go
MODEL ?= config/models/dsv4_flash_decode.yaml

.PHONY: run test bench lint build jaeger

build:
	$(GO) build ./...

run:
	$(GO) run ./cmd/hbgrun run $(MODEL)

test: lint
	$(GO) test -race -count=1 -timeout 60m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./... | tee bench.txt

lint:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# A real Jaeger for the end-to-end test and for looking at runs (tools/jaeger
# is a module of its own, so Jaeger's dependencies stay out of hbg's).
jaeger:
	cd tools/jaeger && $(GO) build -o bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger
