// Package buildinfo holds what a binary was built from, set by the linker
// (hack/build-binaries.sh): -X github.com/ai-dynamo/global-discovery-mcs/internal/buildinfo.Version=v1.2.3
// and likewise Commit and BuildDate. Every binary of the project reads it from here. A
// binary built by `go install <module>/cmd/<name>@vX.Y.Z` has no linker flags; it reports
// the module version the Go command stamped into it.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker; variables because -X can only set package-level strings.
var (
	// Version is the release this binary was built from; "dev" for a local build.
	Version = "dev"
	// Commit is the source's git commit; "unknown" when built outside a checkout.
	Commit = "unknown"
	// BuildDate is the commit's time (RFC 3339), so a rebuild of one commit is identical.
	BuildDate = "unknown"
)

// A `go install module@version` build sets no linker flags but stamps the module version.
func init() {
	if Version != "dev" {
		return
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		Version = info.Main.Version
	}
}

// String is what --version prints after the binary's name.
func String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s %s/%s)", Version, Commit, BuildDate, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
