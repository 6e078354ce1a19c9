GO ?= go
MODEL ?= config/models/dsv4_flash_decode.yaml

.PHONY: run test bench bench-scale bench-serving bench-md lint build jaeger chromium proto

build:
	$(GO) build ./...

run:
	$(GO) run ./cmd/hbgrun run $(MODEL)

test: lint chromium
	$(GO) test -race -count=1 -timeout 60m ./...

bench:
	$(GO) test -run '^$$' -bench . -skip Scale -benchmem -count 6 ./... | tee docs/bench/bench.txt
	$(MAKE) bench-scale
	$(MAKE) bench-serving
	$(MAKE) bench-md

# BENCHMARKS.md, one current table, rendered from the last run's output
# (docs/bench/bench.txt, docs/bench/bench-scale.md, docs/bench/bench-serving.md);
# its history is docs/benchmarks-history.md.
bench-md:
	$(GO) run ./tools/benchmd -bench docs/bench/bench.txt -scale docs/bench/bench-scale.md -serving docs/bench/bench-serving.md -go "$$($(GO) env GOVERSION)" -o BENCHMARKS.md

# The serving runs (issue 40): the models whose steps change, each form,
# --new-keys wait and ordinary, with and without a residency budget, 300
# rounds each (a few minutes).
bench-serving:
	$(GO) build -o "$${TMPDIR:-/tmp}/hbgrun-bench-serving" ./cmd/hbgrun
	$(GO) run ./tools/servingbench -hbgrun "$${TMPDIR:-/tmp}/hbgrun-bench-serving" -o docs/bench/bench-serving.md

# The scaling benchmarks (issue 28): each over sizes a factor of 4 or more
# apart, per unit of work. Their largest sizes take seconds an iteration
# (a cold pass of 10^4 keys with the store on disk, tens of seconds on a
# loaded box), so they run a fixed 3 iterations, 3 times. benchplot draws
# docs/bench/bench-scale*.png and writes docs/bench/bench-scale.md, the table.
bench-scale:
	$(GO) test -run '^$$' -bench Scale -benchtime 3x -count 3 -timeout 90m ./stages ./diskstore ./tests | tee docs/bench/bench-scale.txt
	cd tools/benchplot && $(GO) run . -out ../../docs/bench -table ../../docs/bench/bench-scale.md ../../docs/bench/bench-scale.txt

lint:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# A real Jaeger for the end-to-end test and for looking at runs (tools/jaeger
# is a module of its own, so Jaeger's dependencies stay out of hbg's).
jaeger:
	cd tools/jaeger && $(GO) build -o bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger

# Headless Chromium for the HTML report's browser test (tests/browser_test.go),
# Debian's package, installed when absent (as root, or through sudo).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the browser test"; \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The protobuf Go code (wire/wire.pb.go, peer/peer.pb.go) is committed, so a
# build needs no protoc; after editing a .proto, regenerate them (needs protoc, e.g.
# apt-get install protobuf-compiler, and protoc-gen-go at go.mod's
# google.golang.org/protobuf version).
PROTOC_GEN_GO_VERSION ?= $(shell $(GO) list -m -f '{{.Version}}' google.golang.org/protobuf)
proto:
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	cd wire && PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc --go_out=. --go_opt=paths=source_relative wire.proto
	cd peer && PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc --go_out=. --go_opt=paths=source_relative peer.proto
