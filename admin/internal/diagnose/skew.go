package diagnose

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/semver"
)

// skewResult checks a controller's version against the registry's by the skew policy
// (docs/deploy.md, Upgrade): a controller works with a registry of its own release and of
// the release before or after it.
func skewResult(target, controller, registry string) Result {
	r := Result{Target: target, Check: "version-skew"}
	switch {
	case registry == "":
		r.Status, r.Detail = Warn, "the registry does not report its version (a release before it did)"
		r.Fix = "upgrade the registry: registries first, then controllers"
		return r
	case controller == "":
		r.Status, r.Detail = Warn, fmt.Sprintf("the controller does not report its version (a release before it did); registry %s", registry)
		r.Fix = "upgrade the controller (helm upgrade) to the registry's release"
		return r
	}
	r.Detail = fmt.Sprintf("controller %s, registry %s", controller, registry)
	d, ok := releaseDistance(controller, registry)
	switch {
	case controller == registry || (ok && d == 0):
		r.Status = OK
	case !ok:
		r.Status = Warn
		r.Detail += ": not releases, their distance is unknown"
		r.Fix = "run released versions; the skew policy allows one release between a controller and its registry"
	case d <= 1:
		r.Status = OK
		r.Detail += " (one release apart, within the skew policy)"
	default:
		r.Status = Fail
		r.Detail += fmt.Sprintf(" (%d releases apart)", d)
		r.Fix = "upgrade the older side: registries first, then controllers, one release at a time (docs/deploy.md, Upgrade)"
	}
	return r
}

// releaseDistance is how many minor releases apart two semantic versions are (major
// versions apart count as far apart); ok is false when either is not a release version.
func releaseDistance(a, b string) (int, bool) {
	if !semver.IsValid(a) || !semver.IsValid(b) || semver.Prerelease(a) != "" || semver.Prerelease(b) != "" {
		return 0, false
	}
	if semver.Major(a) != semver.Major(b) {
		return 100, true
	}
	minor := func(v string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(semver.MajorMinor(v), semver.Major(v)+"."))
		return n
	}
	d := minor(a) - minor(b)
	if d < 0 {
		d = -d
	}
	return d, true
}
