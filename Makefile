# berth — the two commands a fresh machine needs:
#   make dev    berth's local environment on its embedded defaults
#   make test   the whole suite (what CI runs)
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
GO_TEST_FLAGS ?= -race -count=1 -timeout=30m

.PHONY: help
help: ## list targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/berth (static: an image of it needs no C library)
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o bin/berth ./cmd/berth

.PHONY: dev
dev: deps build testbin metallb ## run berth dev on its embedded defaults (Ctrl-C stops it; DEV_FLAGS=--redis: separate processes over Redis)
	BERTH_TESTBIN="$$(hack/testbin.sh)" BERTH_METALLB="$$(hack/metallb.sh)" ./bin/berth dev $(DEV_FLAGS)

.PHONY: testbin
testbin: ## build (or reuse) the Kubernetes test binaries
	@hack/testbin.sh >/dev/null

.PHONY: images
images: ## build (or reuse) what the real node's images are made of: the echo program and Debian's busybox
	@hack/images.sh >/dev/null

.PHONY: registry
registry: ## build (or reuse) the OCI image registry the real-node tests push to and pull from (distribution's)
	@hack/registry.sh >/dev/null

.PHONY: netpol
netpol: ## build (or reuse) the real node's NetworkPolicy enforcer (kube-router's policy controller)
	@hack/netpol.sh >/dev/null

.PHONY: dns
dns: ## build (or reuse) the real node's cluster DNS (CoreDNS with its kubernetes plugin)
	@hack/dns.sh >/dev/null

.PHONY: ingressctl
ingressctl: ## build (or reuse) the ingress controller the routing tests run (Traefik)
	@hack/ingress.sh >/dev/null

.PHONY: metallb
metallb: ## build (or reuse) the load-balancer IP allocator the IP operator tests run (MetalLB's controller)
	@hack/metallb.sh >/dev/null

.PHONY: helm
helm: ## build (or reuse) helm, which the chart's tests render charts/berth with
	@hack/tool.sh helm >/dev/null

.PHONY: promtool
promtool: ## unpack (or reuse) Prometheus's promtool from Debian's prometheus package; it checks and unit-tests the chart's alert rules and the dashboard's queries
	@hack/tool.sh promtool >/dev/null

.PHONY: deps
deps: ## install missing system packages (redis-server, jq, bc)
	@hack/deps.sh

.PHONY: fmt-check
fmt-check: ## fail if any Go file is not gofmt-ed
	@files=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$files" ]; then echo "gofmt: these files need formatting:"; echo "$$files"; exit 1; fi

.PHONY: vet
vet: ## go vet (VET_FLAGS: build flags, e.g. -race, which make test passes to reuse go test's compiled packages)
	go vet $(VET_FLAGS) ./...

.PHONY: lint
lint: ## golangci-lint (pinned version, strict config)
	"$$(hack/tool.sh golangci-lint)" run ./...

# The .proto files protogen compiles (paths under api/): berth's own service, and
# Akash's status service with what it imports, vendored from Akash (api/akash/README.md).
PROTOS := provider/v1/provider.proto \
	akash/provider/v1/service.proto akash/provider/v1/status.proto \
	$(patsubst api/%,%,$(wildcard api/akash/inventory/v1/*.proto)) \
	akash/base/attributes/v1/attribute.proto \
	k8s.io/apimachinery/pkg/api/resource/generated.proto

.PHONY: generate
generate: ## regenerate api/v1's deepcopy code, the CRDs in config/crd (controller-gen) and the chart's copy, the chart's values.yaml, values.schema.json, dashboard and docs/helm-values.md (hack/chartgen), and the gRPC code in api/provider and api/akash (protogen)
	cg="$$(hack/tool.sh controller-gen)"; "$$cg" object paths=./api/v1/... && "$$cg" crd paths=./api/v1/... output:crd:dir=config/crd
	cp config/crd/berth.dev_*.yaml charts/berth/crds/
	go run ./hack/chartgen -chart charts/berth
	go -C hack/protogen run . -root "$$PWD/api" -out "$$PWD/api" -go "$$(hack/tool.sh protoc-gen-go)" -go-grpc "$$(hack/tool.sh protoc-gen-go-grpc)" $(PROTOS)

.PHONY: generate-check
generate-check: generate ## fail if the generated files differ from what is committed
	@if ! git diff --quiet -- api config/crd charts docs/helm-values.md || [ -n "$$(git status --porcelain -- api config/crd charts docs/helm-values.md)" ]; then \
		echo "generated files are not current: run make generate and commit"; git status --short -- api config/crd charts docs/helm-values.md; exit 1; fi

.PHONY: test
test: ## the whole suite (hack/test.sh): system packages, every tool built or reused and the checks (concurrently), then go test -race; prints each phase's time
	GO_TEST_FLAGS='$(GO_TEST_FLAGS)' hack/test.sh
