// Package integration runs the project's binaries against real kube-apiservers, etcd and
// dynoxide on this machine.
//
// Test time: a test that mostly waits — for a lease to expire, a certificate to lapse, a
// replication stall to pass, a controller to notice — and asserts no duration tighter than
// its generous timeouts calls t.Parallel(), so those waits overlap (`make test` runs the
// package with -parallel 4; they start once the other tests are done). A test that
// compares a timing with a floor, or bounds a duration within a few seconds, runs alone,
// so that nothing beside it bends its figure.
package integration
