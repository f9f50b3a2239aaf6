# firstword: `make` prints this help; `make check` is what CI runs.
SHELL := /bin/bash
GO ?= go
FUZZTIME ?= 10s
# package:FuzzTarget pairs; every parser and decoder has one.
FUZZ_TARGETS := \
	./internal/sse:FuzzReader \
	./internal/wire/openai:FuzzReadStream \
	./internal/wire/openai:FuzzParseRequest \
	./internal/wire/openai:FuzzDecodeChunk \
	./internal/wire/gemini:FuzzReadStream \
	./internal/wire/anthropic:FuzzReadStream \
	./internal/wire/anthropic:FuzzParseRequest \
	./internal/wire/responses:FuzzParseRequest \
	./internal/wire/anthropic:FuzzDecodeEvent \
	./internal/wire/ollama:FuzzReadStream \
	./internal/provider/sim:FuzzDirective \
	./internal/guard:FuzzScanCards \
	./internal/guard:FuzzScanEmails \
	./internal/guard:FuzzBlocklist \
	./internal/guard:FuzzCheckLocal \
	./internal/contextsrc:FuzzTokenize \
	./internal/contextsrc:FuzzSplitPassages \
	./internal/contextsrc:FuzzExpand

.PHONY: help build run test fuzz lint check bench clean

help: ## show this help
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

build: ## build ./firstword
	$(GO) build -o firstword ./cmd/firstword

run: ## run the gateway on the built-in simulated models
	$(GO) run ./cmd/firstword serve

test: ## run every test with the race detector
	$(GO) test -race -count=1 ./...

fuzz: ## run each fuzz target for FUZZTIME (default 10s)
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$pkg $$fn"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

lint: ## gofmt and go vet
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

check: lint test fuzz ## what CI runs

bench: ## measure the gateway against a direct connection (see docs/BENCHMARKS.md)
	$(GO) run ./cmd/firstword bench

clean: ## remove build outputs
	rm -f firstword
