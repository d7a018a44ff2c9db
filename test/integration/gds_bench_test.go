package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	st "github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery/slicetest"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// BenchmarkGlobalDiscoveryService10kSlices measures the real global-discovery-service
// against a real kube-apiserver holding 10,000 imported slices of 100 clusters (99 pools of
// 10 endpoints and one router each): the time from start to the first full snapshot, the
// time from one slice change to the new snapshot being served, and the process's RSS.
//
//	cd test && go test -run '^$' -bench GlobalDiscoveryService10kSlices -benchtime 1x ./integration/
func BenchmarkGlobalDiscoveryService10kSlices(b *testing.B) {
	ctx := context.Background()
	cl := harness.StartClusters(b, harness.ClusterOptions{SkipCRDs: true})[0]
	for _, n := range []string{"dynamo", "global-discovery"} {
		if err := cl.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for c := range 100 {
		cluster := fmt.Sprintf("cluster-%03d", c)
		for p := range 100 {
			var s *discoveryv1.EndpointSlice
			if p == 99 {
				s = st.MCS(cluster, "global-discovery", "global-router", "derived-r", "", routerPorts, st.Endpoint{IP: fmt.Sprintf("10.%d.200.1", c), Pod: "global-router-0"})
			} else {
				var eps []st.Endpoint
				for e := range 10 {
					eps = append(eps, st.Endpoint{IP: fmt.Sprintf("10.%d.%d.%d", c, p, e), Ready: st.Bool(true), Pod: fmt.Sprintf("relay-%d-%d", p, e)})
				}
				s = st.MCS(cluster, "dynamo", fmt.Sprintf("dgd-%02d-pool-relay", p), fmt.Sprintf("derived-%02d", p), "", relayPorts, eps...)
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if err := cl.Client.Create(ctx, s); err != nil {
					b.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	for b.Loop() {
		port := harness.FreePort(b)
		base := "http://" + harness.Addr(port)
		start := time.Now()
		gds := cl.StartGlobalDiscoveryService(b, "global-discovery-service",
			"--http-addr="+harness.Addr(port), "--pool-discovery=mcs",
			"--router-namespace=global-discovery", "--router-service=global-router", "--router-port-name=http")
		gds.WaitHTTP(b, base+"/readyz", 2*time.Minute)
		b.ReportMetric(time.Since(start).Seconds(), "s-to-ready")

		var s discoveryv1.EndpointSlice
		// Change the router slice of cluster-000 and poll the small /routers document, so
		// the poll loop itself does not load the machine; the discovery rebuilds the same
		// 10,000-slice snapshot either way.
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: "global-discovery", Name: "derived-r-cluster-000"}, &s); err != nil {
			b.Fatal(err)
		}
		s.Endpoints[0].Conditions.Ready = st.Bool(false)
		changed := time.Now()
		if err := cl.Client.Update(ctx, &s); err != nil {
			b.Fatal(err)
		}
		for {
			_, resp, err := harness.Get(base + "/routers")
			if err == nil && strings.Count(resp, `"replica"`) == 99 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64(time.Since(changed).Milliseconds()), "ms-change-to-snapshot")
		b.ReportMetric(harness.ReadProcStat(gds.Pid()).RSSMiB, "RSS-MiB")
		gds.Stop(5 * time.Second)
	}
}
