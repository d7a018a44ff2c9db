// Package api holds the registry API of global-discovery-mcs: the protobuf sources in
// proto/, the Go code generated from them in gen/go (never edited by hand), the OpenAPI
// document and the generated TypeScript and Python clients; pemfile, the CA-bundle
// reader that every binary and Go client of the registry uses for its TLS files; and
// restconn, which carries the generated Go client's calls over the REST port (mcs-admin
// uses it), its routes read from registry_http.yaml.
package api
