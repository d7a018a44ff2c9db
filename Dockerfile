# syntax=docker/dockerfile:1
# The global-discovery-mcs image: /mcs-registry, /mcs-controller, /mcs-admin,
# /global-discovery-service and the CRDs in /crds. `make docker-build docker-push IMG=...`;
# with no Docker engine, `make image` builds the same image as an OCI tarball
# (hack/build-image.sh, tools/image; test/release compares the two).

# The build stage runs on the builder's platform and cross-compiles (buildx sets TARGETOS
# and TARGETARCH), so a multi-arch build needs no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, for the layer cache.
COPY go.work ./
COPY api/go.mod api/go.sum api/
COPY registry/go.mod registry/go.sum registry/
COPY controller/go.mod controller/go.sum controller/
COPY admin/go.mod admin/go.sum admin/
COPY gds-client/go.mod gds-client/go.sum gds-client/
COPY internal/go.mod internal/go.sum internal/
COPY test/go.mod test/go.sum test/
COPY examples/go/go.mod examples/go/go.sum examples/go/
COPY tools/modproxy/go.mod tools/modproxy/go.sum tools/modproxy/
RUN go mod download && cd tools/modproxy && GOWORK=off go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG BUILD_DATE=unknown
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# The same script as `make build`: each binary in its module alone (GOWORK=off).
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH VERSION=$VERSION COMMIT=$COMMIT BUILD_DATE=$BUILD_DATE bash hack/build-binaries.sh /out

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
ARG BUILD_DATE=unknown
LABEL org.opencontainers.image.title="global-discovery-mcs" \
      org.opencontainers.image.description="Kubernetes Multi-Cluster Services for NVIDIA Dynamo: mcs-registry, mcs-controller, mcs-admin, global-discovery-service" \
      org.opencontainers.image.source="https://github.com/ai-dynamo/global-discovery-mcs" \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$COMMIT \
      org.opencontainers.image.created=$BUILD_DATE \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/mcs-registry /out/mcs-controller /out/mcs-admin /out/global-discovery-service /
COPY charts/global-discovery-mcs/files/crds /crds
USER 65532:65532
ENTRYPOINT ["/mcs-registry"]
