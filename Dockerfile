# The auditor as a static binary on distroless (non-root). Build: make image (or docker build -t auditor .)
FROM golang:1.27 AS build
ENV GOTOOLCHAIN=go1.27.3 CGO_ENABLED=0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY internal ./internal
ARG COMMIT=unknown
ARG VERSION=
RUN go build -trimpath -ldflags "-s -w -X github.com/llm-gitops/platform/internal/engine/version.Commit=${COMMIT} -X github.com/llm-gitops/platform/internal/engine/version.Version=${VERSION} -X helm.sh/helm/v4/internal/version.version=v4.3.1" -o /out/auditor ./cmd/auditor

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/auditor /auditor
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/auditor"]
