// Package version holds the build's version, set by the linker:
// -X github.com/ai-dynamo/global-discovery-mcs/registry/internal/version.Version=v1.2.3
package version

// Version is the release this binary was built from; "dev" for a local build.
var Version = "dev"
