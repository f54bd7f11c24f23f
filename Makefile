# otelcol-cost: build · run · test · bench · generate · lint
SHELL        := /bin/bash
GO           ?= go
OCB_VERSION  := v0.161.0
TOOLS        := $(CURDIR)/.tools
OCB          := $(TOOLS)/builder
HELM         := $(TOOLS)/helm
TELEMETRYGEN := $(TOOLS)/telemetrygen
JAEGER       := $(TOOLS)/jaeger
HELM_VERSION := v3.21.4
BENCHSTAT    := $(TOOLS)/benchstat
GOLANGCI     := $(TOOLS)/golangci-lint
GOLANGCI_VERSION := v2.15.0
# golang.org/x/perf has no tags; this is the newest pseudo-version served.
PERF_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
BIN          := $(CURDIR)/bin/otelcol-cost
CONFIG       ?= configs/tail.yaml
# Sources the binary depends on: our module and the generated distribution.
SOURCES      := $(shell find . -name '*.go' -not -path './.tools/*' -not -name '*_test.go') go.mod go.sum dist/go.mod dist/go.sum

export CGO_ENABLED := 0

.PHONY: all build run test unit integration chart-test bench bench-go bench-e2e generate check-generate lint tools deps image image-test fuzz

all: build

build: $(BIN)

# Same flags ocb uses; go build straight from dist/ keeps rebuilds incremental.
$(BIN): $(SOURCES)
	cd dist && $(GO) build -trimpath -ldflags="-s -w" -o $(BIN) .

# The container image, built without a Docker daemon (tools/imagebuild, on
# go-containerregistry): one static binary per platform, an OCI index of
# scratch-style images (CA certificates, user 10001, configs/tail.yaml baked
# in), written as an OCI layout to bin/image; with REGISTRY set, also pushed
# to $(REGISTRY)/otelcol-cost:$(VERSION) (credentials from ~/.docker/config.json).
VERSION         ?= 0.1.0
REGISTRY        ?=
IMAGE_PLATFORMS := linux/amd64 linux/arm64
IMAGE_BINARIES  := $(foreach p,$(IMAGE_PLATFORMS),$(CURDIR)/bin/$(subst /,-,$(p))/otelcol-cost)

$(CURDIR)/bin/linux-%/otelcol-cost: $(SOURCES)
	cd dist && GOOS=linux GOARCH=$* $(GO) build -trimpath -ldflags="-s -w" -o $@ .

image: $(IMAGE_BINARIES)
	@test -f /etc/ssl/certs/ca-certificates.crt || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ca-certificates >/dev/null; }
	cd tools/imagebuild && $(GO) run . -out $(CURDIR)/bin/image -version $(VERSION) \
		-revision "$$(git -C $(CURDIR) rev-parse HEAD 2>/dev/null || echo unknown)" \
		-created "$$(git -C $(CURDIR) log -1 --format=%ct 2>/dev/null || echo 0)" \
		-config $(CURDIR)/configs/tail.yaml \
		$(foreach p,$(IMAGE_PLATFORMS),-binary $(p)=$(CURDIR)/bin/$(subst /,-,$(p))/otelcol-cost) \
		$(if $(REGISTRY),-push $(REGISTRY)/otelcol-cost:$(VERSION))

# Inspects the built layout: both platforms, entrypoint, user, labels; runs
# the amd64 binary inside (components, validate the baked-in config).
image-test: image
	cd tools/imagebuild && OTELCOL_COST_IMAGE=$(CURDIR)/bin/image $(GO) test -count=1 ./...

# Runs the single-node pipeline. With OTLP_BACKEND_ENDPOINT set, kept traces
# go to that backend (configs/backend.yaml) instead of the local file.
run: build
	$(BIN) --config $(CONFIG) $(if $(OTLP_BACKEND_ENDPOINT),--config configs/backend.yaml)

$(OCB):
	GOBIN=$(TOOLS) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)

# A helm built with go install reports Kubernetes v1.20 unless told the
# client-go minor it was built with (helm's own Makefile passes these), and
# the chart's kubeVersion (>= 1.30) would then fail `helm template`.
HELM_K8S_MINOR := 36
HELM_LDFLAGS := $(foreach p,chartutil lint/rules,-X helm.sh/helm/v3/pkg/$(p).k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/$(p).k8sVersionMinor=$(HELM_K8S_MINOR)) \
	-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)

$(HELM):
	GOBIN=$(TOOLS) $(GO) install -ldflags '$(HELM_LDFLAGS)' helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# A real tracing backend for the end-to-end test, built from its own module
# (tools/jaeger pins Jaeger v1.75.0 as a tool): its collector versions differ
# from ours and never enter our module graph.
$(JAEGER): tools/jaeger/go.mod
	cd tools/jaeger && $(GO) build -o $(JAEGER) github.com/jaegertracing/jaeger/cmd/jaeger

# The load generator the README tells a newcomer to run; a test runs it as written.
$(TELEMETRYGEN):
	GOBIN=$(TOOLS) $(GO) install github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@$(OCB_VERSION)

$(BENCHSTAT):
	GOBIN=$(TOOLS) $(GO) install golang.org/x/perf/cmd/benchstat@$(PERF_VERSION)

$(GOLANGCI):
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)

# Go-installed tools the tests use.
tools: $(OCB) $(HELM) $(TELEMETRYGEN) $(JAEGER)

# promtool (alert rule tests) and prometheus (end-to-end scrapes) come from
# Debian's `prometheus` package, installed when missing.
deps:
	@if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then \
		echo "installing Debian's prometheus package (promtool, prometheus)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	fi
	@if ! command -v ip >/dev/null 2>&1; then \
		echo "installing Debian's iproute2 (ip netns, for the handoff end-to-end test)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2 >/dev/null; \
	fi

# Regenerates dist/ (sources, go.mod, go.sum) from builder-config.yaml.
# Our components' metadata.yaml, each generated by mdatagen into its
# internal/metadata (status, telemetry), documentation.md and lifecycle tests.
COMPONENTS := $(patsubst %/metadata.yaml,%,$(wildcard */*/metadata.yaml))

# mdatagen comes from its own module (tools/mdatagen): v0.161.0 cannot be
# installed here (a module it needs is refused), v0.159.0 is the newest that
# does; its output builds, and its lifecycle tests pass, on the pinned
# v0.161.0 modules.
generate: $(OCB)
	$(OCB) --config builder-config.yaml --skip-compilation
	cd tools/mdatagen && for c in $(COMPONENTS); do $(GO) tool mdatagen ../../$$c/metadata.yaml || exit 1; done

# Fails when the committed dist/ or a component's generated files differ
# from a fresh generation (or a generated file is not committed).
check-generate: generate
	@git diff --exit-code --stat -- dist $(COMPONENTS) || { echo "generated files are stale: run 'make generate' and commit them"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- dist $(COMPONENTS)); if [ -n "$$untracked" ]; then echo "generated files not committed: $$untracked"; exit 1; fi

# gofmt, go vet, golangci-lint (.golangci.yml: contrib's usual linters, and
# the sampler's import layers), and no copied code in the processors.
lint: $(GOLANGCI)
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^dist/')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	cd tools/imagebuild && $(GO) vet ./...
	$(GO) test -count=1 ./internal/doclinks/ # every relative link and #anchor of the docs resolves
	$(GOLANGCI) run ./...

unit:
	$(GO) test -count=1 ./internal/... ./processor/...

integration: deps build $(HELM) $(TELEMETRYGEN) $(JAEGER)
	OTELCOL_COST_BIN=$(BIN) HELM=$(HELM) TELEMETRYGEN=$(TELEMETRYGEN) JAEGER=$(JAEGER) $(GO) test -count=1 -timeout 40m ./integration/...

chart-test: deps build $(HELM)
	OTELCOL_COST_BIN=$(BIN) HELM=$(HELM) $(GO) test -count=1 -run 'Chart|MemoryLimiter|AlertRules' ./integration/...

# What CI runs: lint, generated sources current, unit and integration tests
# (the built binary against real OTLP peers on loopback), benchmarks compile
# and run once.
test: deps lint check-generate build $(HELM) $(TELEMETRYGEN) $(JAEGER) image-test
	@rm -f bin/e2e-report.txt
	OTELCOL_COST_BIN=$(BIN) HELM=$(HELM) TELEMETRYGEN=$(TELEMETRYGEN) JAEGER=$(JAEGER) E2E_REPORT=$(CURDIR)/bin/e2e-report.txt $(GO) test -count=1 -timeout 40m ./...
	@cat bin/e2e-report.txt 2>/dev/null || true
	$(GO) test -run '^$$' -bench . -benchtime 1x ./bench/... ./processor/...
	$(MAKE) fuzz

# The gateway's parsers of what clients send, fuzzed for a bounded time
# (new inputs the engine finds are kept in the Go build cache, not here).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzSplit$$' -fuzztime $(FUZZTIME) ./exporter/tracerouterexporter/
	$(GO) test -run '^$$' -fuzz '^FuzzCheckedParse$$' -fuzztime $(FUZZTIME) ./internal/otlpwire/

# The figures in docs/BENCHMARKS.md (about 90 minutes on 2 cores): every Go
# benchmark 6 times (the fewest for which benchstat gives a 95% confidence
# interval), medians by benchstat in bench.txt; then the binary ramped until
# it refuses, in bench-e2e.md.
bench: bench-go bench-e2e

# TailSamplers runs five times with one count each, not -count 5: each
# contrib run and the ours run it is compared with are then a minute apart,
# not several (the VM's speed drifts; docs/BENCHMARKS.md, "Tail samplers
# side by side").
bench-go: $(BENCHSTAT)
	$(GO) test -run '^$$' -bench SpanCost -benchmem -count 6 ./processor/spancostprocessor/ | tee bench.out
	for i in 1 2 3 4 5; do $(GO) test -run '^$$' -bench TailSamplers -benchtime 4000x -count 1 -cpu 1 ./bench/ | tee -a bench.out; done
	$(GO) test -run '^$$' -bench Feeders -benchtime 3000x -count 5 -cpu 1,2 ./bench/ | tee -a bench.out
	$(GO) test -run '^$$' -bench HeapPerBufferedSpan -benchtime 200x -count 6 ./bench/ | tee -a bench.out
	$(GO) test -run '^$$' -bench OTLPWire -benchmem -count 6 ./bench/ | tee -a bench.out
	$(GO) test -run '^$$' -bench SamplerScaling -benchtime 500x -count 6 ./bench/ | tee -a bench.out
	$(GO) test -run '^$$' -bench IntakeDepth -benchtime 20000x -count 5 -cpu 1 ./bench/ | tee -a bench.out
	$(GO) test -run '^$$' -bench OutlierGroups -benchtime 2000x -count 6 ./bench/ | tee -a bench.out
	$(GO) test -run '^$$' -bench RuleMatching -count 6 ./processor/budgettailsamplingprocessor/internal/rules/ | tee -a bench.out
	$(GO) test -run '^$$' -bench Rules -benchtime 3000x -count 6 -cpu 1 ./bench/ | tee -a bench.out
	$(GO) test -run '^$$' -bench Forward -count 5 ./processor/budgettailsamplingprocessor/internal/forward/ | tee -a bench.out
	$(GO) test -run '^$$' -bench PartCompression -count 5 ./exporter/tracerouterexporter/ | tee -a bench.out
	$(GO) test -run '^$$' -bench LogStores -benchtime 2000x -count 3 ./processor/budgettailsamplingprocessor/internal/durable/ | tee -a bench.out
	$(GO) test -run '^$$' -bench DurableReplayFullBuffer -benchtime 1x -count 3 ./processor/budgettailsamplingprocessor/ | tee -a bench.out
	$(BENCHSTAT) bench.out | tee bench.txt

# The ramps of docs/BENCHMARKS.md sections 10 and 14; sections 15 and 18
# ramp other setups at their own rates (their commands are there).
bench-e2e: build
	$(GO) run ./bench/cmd/loadramp -bin $(BIN) -setups bare,tail,tail_heap,contrib,gateway,gateway_contrib -refine 3 -warmup 20s -out bench-e2e.md
