# syntax=docker/dockerfile:1
# The global-discovery-mcs image: /mcs-registry, /mcs-controller, /mcs-admin,
# /global-discovery-service and the CRDs in /crds. `make docker-build docker-push IMG=...`.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, for the layer cache.
COPY go.work ./
COPY api/go.mod api/go.sum api/
COPY registry/go.mod registry/go.sum registry/
COPY controller/go.mod controller/go.sum controller/
COPY admin/go.mod admin/go.sum admin/
COPY gds-client/go.mod gds-client/go.sum gds-client/
COPY test/go.mod test/go.sum test/
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG BUILD_DATE=unknown
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# The same script as `make build`.
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH VERSION=$VERSION COMMIT=$COMMIT BUILD_DATE=$BUILD_DATE bash hack/build-binaries.sh /out

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mcs-registry /out/mcs-controller /out/mcs-admin /out/global-discovery-service /
COPY charts/global-discovery-mcs/files/crds /crds
USER 65532:65532
ENTRYPOINT ["/mcs-registry"]
