// Command coredns is CoreDNS with the plugins the local clusters' DNS needs:
// cluster.local from the kubernetes plugin, clusterset.local from multicluster.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/whoami"

	_ "github.com/ai-dynamo/global-discovery-mcs/tools/coredns/multicluster"
)

func main() {
	// A plugin outside CoreDNS's own list runs where its directive stands in the chain:
	// multicluster just before kubernetes, as github.com/coredns/multicluster asks.
	var directives []string
	for _, d := range dnsserver.Directives {
		if d == "kubernetes" {
			directives = append(directives, "multicluster")
		}
		directives = append(directives, d)
	}
	dnsserver.Directives = directives
	coremain.Run()
}
