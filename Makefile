# firstword: `make` prints this help; `make check` is what CI runs.
SHELL := /bin/bash
GO ?= go
FUZZTIME ?= 10s
# package:FuzzTarget pairs; every parser and decoder has one.
FUZZ_TARGETS := \
	./internal/httpapi:FuzzParseIdempotencyKey \
	./internal/config:FuzzParse \
	./internal/httpapi:FuzzCORSRequestHeaders \
	./internal/httpapi:FuzzCursor \
	./internal/sse:FuzzReader \
	./internal/yardstick:FuzzChatReader \
	./internal/yardstick:FuzzProcParsers \
	./internal/yardstick:FuzzParseThreshold \
	./internal/hostcpu:FuzzParse \
	./internal/limits:FuzzParseOverride \
	./internal/router:FuzzSeam \
	./internal/wire/openai:FuzzReadStream \
	./internal/wire/openai:FuzzParseRequest \
	./internal/wire/openai:FuzzParseSimpleRequest \
	./internal/wire/openai:FuzzEncodeSimpleRequest \
	./internal/wire/openai:FuzzDecodeChunk \
	./internal/wire/openai:FuzzChunkEncoder \
	./internal/wire/gemini:FuzzReadStream \
	./internal/wire/gemini:FuzzDecodeResponse \
	./internal/wire/anthropic:FuzzReadStream \
	./internal/wire/anthropic:FuzzParseRequest \
	./internal/wire/responses:FuzzParseRequest \
	./internal/wire/anthropic:FuzzDecodeEvent \
	./internal/wire/anthropic:FuzzEventEncoder \
	./internal/wire/ollama:FuzzReadStream \
	./internal/provider/sim:FuzzDirective \
	./internal/budget:FuzzTimingsJSON \
	./internal/jsonenc:FuzzAppendString \
	./internal/jsonenc:FuzzAppendFloat \
	./internal/jsonscan:FuzzScanner \
	./internal/guard:FuzzScanCards \
	./internal/guard:FuzzScanEmails \
	./internal/guard:FuzzBlocklist \
	./internal/guard:FuzzCheckLocal \
	./internal/contextsrc:FuzzTokenize \
	./internal/contextsrc:FuzzSplitPassages \
	./internal/contextsrc:FuzzExpand \
	./internal/connguard:FuzzFraming \
	./internal/connguard:FuzzServer \
	./internal/provider:FuzzScrub \
	./internal/wire/responses:FuzzReadUpstreamStream

.PHONY: help build run test fuzz lint check bench clean

help: ## show this help
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

build: ## build ./firstword
	$(GO) build -o firstword ./cmd/firstword

run: ## run the gateway on the built-in simulated models
	$(GO) run ./cmd/firstword serve

# -p 1: packages one at a time, so the tests that measure timing (stage
# budgets, heartbeats, chunk gaps) do not compete with a browser test
# for the same cores. scripts/testreport prints what go test prints
# without -v, then every skipped test and the reason it gave; pipefail
# makes the exit status go test's.
test: ## run every test with the race detector, then list what was skipped and why
	@echo "go test -race -count=1 -p 1 ./...   (skipped tests are listed at the end)"
	@set -o pipefail; $(GO) test -race -count=1 -p 1 -json ./... | $(GO) run ./scripts/testreport

# A target fails the run when it fails and writes a reproducer. Go 1.26's
# fuzz coordinator can also fail a target with a bare "context deadline
# exceeded" at the end of -fuzztime when the machine is busy (a toolchain
# race, golang/go#75804, fixed in Go 1.27); that is reported, not failed.
fuzz: ## run each fuzz target for FUZZTIME (default 10s)
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$pkg $$fn"; \
		before=$$(ls $$pkg/testdata/fuzz/$$fn 2>/dev/null | wc -l); \
		out=$$($(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg 2>&1); rc=$$?; \
		echo "$$out" | tail -n 3; \
		if [ $$rc -ne 0 ]; then \
			after=$$(ls $$pkg/testdata/fuzz/$$fn 2>/dev/null | wc -l); \
			if [ "$$after" = "$$before" ] && echo "$$out" | grep -q '^    context deadline exceeded$$'; then \
				echo "fuzz $$fn: Go's fuzz coordinator stopped with 'context deadline exceeded' and wrote no reproducer (golang/go#75804); not a failure"; \
			else \
				echo "$$out"; exit 1; \
			fi; \
		fi; \
	done

lint: ## gofmt and go vet
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

check: lint test fuzz ## what CI runs

bench: ## the same-run floors: the gateway against a direct connection and httputil.ReverseProxy (see docs/BENCHMARKS.md)
	$(GO) run ./cmd/firstword bench

clean: ## remove build outputs
	rm -f firstword
