package api

import _ "embed" // the HTTP mapping below

// RegistryHTTPRules is registry_http.yaml: the registry API's HTTP mapping, from which
// grpc-gateway serves the REST port and the OpenAPI document is made. restconn reads it, so
// Go clients of the REST port take their routes from the same file.
//
//go:embed registry_http.yaml
var RegistryHTTPRules []byte
