// Package buildinfo holds what a binary was built from, set by the linker
// (hack/build-binaries.sh): -X github.com/ai-dynamo/global-discovery-mcs/internal/buildinfo.Version=v1.2.3
// and likewise Commit and BuildDate. Every binary of the project reads it from here.
package buildinfo

import (
	"fmt"
	"runtime"
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

// String is what --version prints after the binary's name.
func String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s %s/%s)", Version, Commit, BuildDate, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
