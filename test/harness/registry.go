package harness

import (
	"slices"
	"testing"
	"time"
)

// Registry is a running mcs-registry.
type Registry struct {
	*Process
	GRPCAddr, RESTAddr, AdminAddr string
	args                          []string
}

// StartRegistry starts bin/mcs-registry on free loopback ports with extra flags and waits
// until /readyz answers.
func StartRegistry(tb testing.TB, extra ...string) *Registry {
	tb.Helper()
	return StartRegistryAt(tb, Addr(FreePort(tb)), extra...)
}

// StartRegistryAt is StartRegistry with a given gRPC address, for a registry that clients
// were told about before it started.
func StartRegistryAt(tb testing.TB, grpcAddr string, extra ...string) *Registry {
	tb.Helper()
	r := &Registry{
		GRPCAddr: grpcAddr, RESTAddr: Addr(FreePort(tb)), AdminAddr: Addr(FreePort(tb)),
	}
	// Every local client connects from 127.0.0.1, where --max-watches-per-client and
	// --client-rate would count a hundred clusters' controllers as one client: a test sets
	// its own values to test them (the door still admits every call).
	r.args = append([]string{"--grpc-addr", r.GRPCAddr, "--rest-addr", r.RESTAddr, "--admin-addr", r.AdminAddr, "--log-format", "text",
		"--max-watches-per-client=100000", "--client-rate=1000000", "--client-burst=1000000"}, extra...)
	r.start(tb)
	return r
}

func (r *Registry) start(tb testing.TB) {
	tb.Helper()
	var env []string
	if slices.Contains(r.args, "--store=dynamodb") {
		// Every DynamoDB a test starts is dynoxide, which takes these static credentials.
		env = []string{"AWS_ACCESS_KEY_ID=" + DynamoDBAccessKey, "AWS_SECRET_ACCESS_KEY=" + DynamoDBSecretKey}
	}
	r.Process = startProcessEnv(tb, "mcs-registry", nil, env, Binary(tb, "mcs-registry"), r.args...)
	r.WaitHTTP(tb, "http://"+r.AdminAddr+"/readyz", 30*time.Second)
}

// Restart stops the registry and starts it again on the same ports and flags.
func (r *Registry) Restart(tb testing.TB) {
	tb.Helper()
	r.Stop(15 * time.Second)
	r.start(tb)
}

// RestartAfter stops the registry, waits down, and starts it again on the same ports and
// flags: a registry pod that takes that long to be replaced.
func (r *Registry) RestartAfter(tb testing.TB, down time.Duration) {
	tb.Helper()
	r.Stop(15 * time.Second)
	time.Sleep(down)
	r.start(tb)
}
