# The two commands a newcomer needs: `make demo` and `make test`. Everything else is built on demand.
SHELL := /bin/bash
export GOTOOLCHAIN := go1.27.3
export GOFLAGS := -buildvcs=false

K8S_VERSION  := v1.37.2
ETCD_VERSION := v3.7.3
export KUBE_BIN_DIR := $(CURDIR)/bin/k8s-$(K8S_VERSION)
export ETCD_BIN_DIR := $(CURDIR)/bin/etcd-$(ETCD_VERSION)
CLUSTER_DIR  := $(CURDIR)/.cluster
COMMIT       := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# The release a build is stamped with: the tag at HEAD, else the commit (dirty when the work tree is).
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE        ?= registry.example.com/llm/auditor:$(VERSION)
PLATFORMS    := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# The Helm SDK reports its release to charts (.Capabilities.HelmVersion) as Argo CD's helm does.
LDFLAGS      := -X github.com/llm-gitops/platform/internal/engine/version.Commit=$(COMMIT) -X helm.sh/helm/v4/internal/version.version=v4.3.1
# Every binary is static (no cgo), stripped (-s -w), without local paths (-trimpath) or a build
# id, and stamped with VERSION: the same source gives the same bytes. DEBUG=1 keeps the symbols.
GO_BUILD     := CGO_ENABLED=0 go build -trimpath -ldflags "$(if $(DEBUG),,-s -w -buildid=) $(LDFLAGS) -X github.com/llm-gitops/platform/internal/engine/version.Version=$(VERSION)"
# The chart is released with the binary: vX.Y.Z is chart version X.Y.Z (charts/auditor/Chart.yaml).
CHART_VERSION = $(shell sed -n 's/^version: *//p' charts/auditor/Chart.yaml)
HELM         := $(CURDIR)/bin/helm-v4.3.1/helm
TEST_TIMEOUT ?= 40m

.PHONY: all build release chart-version auditor-base image tools browser test test-unit vet demo cluster-up cluster-down bench fuzz fmt clean help

all: build

help: ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build bin/auditor: static, stripped, stamped with VERSION (DEBUG=1 keeps symbols)
	@mkdir -p bin
	$(GO_BUILD) -o bin/auditor ./cmd/auditor

release: chart-version ## binaries for Linux and macOS, amd64 and arm64, and the chart, in dist/ with SHA256SUMS (VERSION=v1.2.3)
	@rm -rf dist && mkdir -p dist
	@for p in $(PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; out=dist/auditor-$(VERSION)-$$os-$$arch; \
	  echo ">>> $$out"; \
	  GOOS=$$os GOARCH=$$arch $(GO_BUILD) -o $$out ./cmd/auditor || exit 1; \
	done
	@if [[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]]; then $(HELM) package charts/auditor -d dist; \
	  else echo "(no chart: VERSION $(VERSION) is not a release tag)"; fi
	@cd dist && $$(command -v sha256sum || echo shasum -a 256) auditor-* > SHA256SUMS && cat SHA256SUMS
	@ls -l dist/auditor-*-linux-amd64 && file dist/auditor-*-linux-amd64

chart-version: ## a release tag vX.Y.Z must be charts/auditor's version and appVersion X.Y.Z
	@if [[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]]; then \
	  app=$$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}/\1/p' charts/auditor/Chart.yaml); \
	  if [ "v$(CHART_VERSION)" != "$(VERSION)" ] || [ "v$$app" != "$(VERSION)" ]; then \
	    echo "charts/auditor/Chart.yaml says version $(CHART_VERSION), appVersion $$app; the release is $(VERSION): set both to $(VERSION:v%=%)" >&2; exit 1; fi; \
	fi

image: ## the container image (Dockerfile) as IMAGE; push it with docker push (GO_IMAGE, BASE_IMAGE: base images pinned by digest)
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) docker build --build-arg COMMIT=$(COMMIT) --build-arg VERSION=$(VERSION) \
	  $(if $(GO_IMAGE),--build-arg GO_IMAGE=$(GO_IMAGE)) $(if $(BASE_IMAGE),--build-arg BASE_IMAGE=$(BASE_IMAGE)) -t $(IMAGE) .
	@echo "built $(IMAGE); push it with: docker push $(IMAGE)"
	@echo "(IMAGE=your.registry/llm/auditor:tag make image builds it under your name)"

tools: ## build kube-apiserver, scheduler, controller-manager, etcd, Argo CD, kwok, kustomize, helm and Redis from Go modules (once)
	@K8S_VERSION=$(K8S_VERSION) ETCD_VERSION=$(ETCD_VERSION) hack/build-tools.sh

vet: ## gofmt + go vet
	@out=$$(gofmt -l cmd internal hack 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

browser: ## the distribution's Chromium, for the web view's browser test (apt-get as root when absent)
	@command -v chromium >/dev/null || { echo "installing Debian's chromium (the web view is tested in it)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y --no-install-recommends chromium >/dev/null || { apt-get update -qq && apt-get install -y --no-install-recommends chromium >/dev/null; }; \
	  else echo "run as root: apt-get install chromium" >&2; exit 1; fi; }

# Every test that needs the cluster runs here: missing binaries fail (internal/testing/testcluster need.go).
# gotestsum runs go test and, at the end, lists the slowest tests (bin/test-report.json keeps them all).
GOTESTSUM := $(CURDIR)/bin/gotestsum-v1.13.0/gotestsum
$(GOTESTSUM):
	@echo "building gotestsum v1.13.0 from the Go module proxy"
	@GOBIN=$(dir $@) GOFLAGS= go install gotest.tools/gotestsum@v1.13.0

test: export AUDITOR_TEST_CLUSTER := required
test: tools browser vet $(GOTESTSUM) ## vet and every test against the real API server; lists the slowest tests at the end
	@$(GOTESTSUM) --format pkgname-and-test-fails --jsonfile bin/test-report.json -- -count=1 -timeout $(TEST_TIMEOUT) ./...; rc=$$?; \
	  echo "slowest tests (over 60 s):"; $(GOTESTSUM) tool slowest --jsonfile bin/test-report.json --threshold 60s | head -25; exit $$rc

test-unit: ## every test that needs no cluster (under 3 min on 2 cores with a warm build cache; longer cold)
	AUDITOR_TEST_CLUSTER=off go test -count=1 ./...

bench: tools ## benchmarks against the real API server
	go test -run '^$$' -bench . -benchmem -timeout 120m ./...

FUZZTIME ?= 30s
fuzz: ## run every fuzz target for FUZZTIME (the minimizer stalls on this toolchain: minimizing is off)
	@for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' internal | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -h '^func Fuzz' $$pkg/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9]*\).*/\1/'); do \
	    echo ">>> $$pkg $$f"; go test ./$$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 0 -parallel 1 || exit 1; \
	  done; \
	done

demo: tools build ## the main job on a local real cluster and a local Git repository
	@hack/demo.sh

ENV    ?= prod
ARGOCD ?= on
cluster-up: tools ## start a local cluster (Argo CD syncing clusters/$(ENV), kwok nodes; ARGOCD=off without Argo CD; CLUSTERS=3 adds two clusters registered in Argo CD); prints `export KUBECONFIG=...`
	@go run ./cmd/testcluster up --dir $(CLUSTER_DIR) --env $(ENV) --argocd=$(if $(filter off,$(ARGOCD)),false,true) --clusters $(or $(CLUSTERS),1)

cluster-down: ## stop the local cluster
	@go run ./cmd/testcluster down --dir $(CLUSTER_DIR)

fmt:
	gofmt -w cmd internal

clean: cluster-down
	rm -rf bin/auditor dist .cluster

auditor-base: ## render charts/auditor into base/auditor/auditor.yaml (the platform's values) and deploy/auditor/auditor.yaml (the defaults)
	@hack/auditor-base.sh $(HELM)
