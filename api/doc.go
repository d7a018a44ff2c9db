// Package api holds the registry API of global-discovery-mcs: the protobuf sources in
// proto/, the Go code generated from them in gen/go (never edited by hand), the OpenAPI
// document and the generated TypeScript and Python clients.
package api
