# The auditor as a static binary on distroless (non-root). Build: make image (or docker build -t auditor .)
# Reproducible: the Go toolchain is pinned to the patch release, the binary is built with
# -trimpath, without a build id or VCS stamp, and stamped only with the build args; pin both base
# images by digest (GO_IMAGE, BASE_IMAGE) and build with SOURCE_DATE_EPOCH set for equal layers.
ARG GO_IMAGE=golang:1.27.3
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot
FROM ${GO_IMAGE} AS build
ENV GOTOOLCHAIN=go1.27.3 CGO_ENABLED=0 GOFLAGS=-buildvcs=false
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY internal ./internal
ARG COMMIT=unknown
ARG VERSION=
RUN go build -trimpath -ldflags "-s -w -buildid= -X github.com/llm-gitops/platform/internal/engine/version.Commit=${COMMIT} -X github.com/llm-gitops/platform/internal/engine/version.Version=${VERSION} -X helm.sh/helm/v4/internal/version.version=v4.3.1" -o /out/auditor ./cmd/auditor

FROM ${BASE_IMAGE}
COPY --from=build /out/auditor /auditor
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/auditor"]
