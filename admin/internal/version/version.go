// Package version holds the build's version, set by the linker.
package version

// Version is the release this binary was built from; "dev" for a local build.
var Version = "dev"
