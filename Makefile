# Steward's Makefile. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
export PATH := /usr/local/go/bin:$(PATH)

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN_VERSION ?= v0.19.0
GOLANGCI_LINT_VERSION ?= v2.15.0
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Playground

.PHONY: demo
demo: prereqs ## Start the local test bed, run Steward on it, apply a sample EtcdCluster and show its state.
	go run ./cmd/steward-testbed demo

.PHONY: demo-down
demo-down: ## Stop the playground (every process the test bed started) and clean up the host.
	go run ./cmd/steward-testbed down

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code from the API types.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from markers into config/.
	$(CONTROLLER_GEN) rbac:roleName=steward-manager crd paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (gosec, depguard, revive, ...).
	$(GOLANGCI_LINT) run ./...

.PHONY: verify
verify: generate manifests $(GOLANGCI_LINT) ## Check formatting, vet, that generated files are fresh and committed, and lint.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	@git diff --exit-code -- api config || { echo "generated files are stale: run make generate manifests and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config)" || { echo "uncommitted generated files:"; git status --porcelain -- api config; exit 1; }
	$(GOLANGCI_LINT) run ./...

.PHONY: build
build: ## Build the operator into bin/steward.
	go build -o $(LOCALBIN)/steward ./cmd/steward

.PHONY: run
run: ## Run the operator against the current kubeconfig.
	go run ./cmd/steward

##@ Tests

.PHONY: test
test: prereqs ## Run all test tiers: unit, then integration and e2e on the local test bed (needs root).
	go test -p 1 -count=1 -timeout 80m ./...

.PHONY: test-short
test-short: ## Run the fast tiers only (no test bed).
	go test -short ./...

FUZZTIME ?= 20s

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 20s); findings go to testdata/fuzz and become seeds.
	FUZZTIME=$(FUZZTIME) bash hack/fuzz.sh

.PHONY: bench
bench: prereqs ## Measure operations on the test bed and write docs/benchmarks.md.
	go run ./cmd/steward-testbed bench

.PHONY: prereqs
prereqs: ## Install the Debian packages the test bed needs, if missing.
	bash hack/prereqs.sh

##@ Tools

$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(GOLANGCI_LINT):
	GOBIN=$(LOCALBIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@
