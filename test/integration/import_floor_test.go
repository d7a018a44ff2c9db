package integration

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// importFloor is the kube-apiserver's own rate for the writes an import makes, measured
// with the concurrency the controller uses (workers at once) and its client settings (no
// client-side rate limit): per Service, in a namespace of its own, a ServiceImport, its
// Service (owned by it), `sources` EndpointSlices of `endpoints` endpoints (owned by the
// Service), then the ServiceImport's spec.ips and status patched, as the controller does.
// It returns the writes made and the time they took.
func importFloor(b *testing.B, cl *harness.Cluster, ns string, services, sources, endpoints, workers int) (int, time.Duration) {
	ctx := context.Background()
	cfg := rest.CopyConfig(cl.Config)
	cfg.QPS = -1 // as controller-runtime's GetConfig: API priority and fairness, no client limiter
	c, err := client.New(cfg, client.Options{Scheme: cl.Client.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Create(ctx, namespace(ns)); err != nil {
		b.Fatal(err)
	}
	var writes atomic.Int64
	write := func(err error) {
		if err != nil {
			b.Error(err)
			return
		}
		writes.Add(1)
	}
	one := func(i int) {
		si := &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc-%04d", i), Labels: map[string]string{"multicluster.dynamo.nvidia.com/managed-by": "floor"}},
			Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
		}
		write(c.Create(ctx, si))
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("derived-%04d", i), Labels: map[string]string{mcsv1beta1.LabelServiceName: si.Name}},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
		}
		if err := controllerutil.SetControllerReference(si, svc, c.Scheme()); err != nil {
			b.Fatal(err)
		}
		write(c.Create(ctx, svc))
		for s := range sources {
			sl := &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", svc.Name, s), Labels: map[string]string{
					discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "floor", mcsv1beta1.LabelServiceName: si.Name, mcsv1beta1.LabelSourceCluster: fmt.Sprintf("exporter-%d", s)}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
			}
			for e := range endpoints {
				sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", s, i/100, (i%100)*2+e)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
			}
			if err := controllerutil.SetControllerReference(svc, sl, c.Scheme()); err != nil {
				b.Fatal(err)
			}
			write(c.Create(ctx, sl))
		}
		base := si.DeepCopy()
		si.Spec.IPs = svc.Spec.ClusterIPs
		write(c.Patch(ctx, si, client.MergeFrom(base)))
		base = si.DeepCopy()
		si.Status.Clusters = nil
		for s := range sources {
			si.Status.Clusters = append(si.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: fmt.Sprintf("exporter-%d", s)})
		}
		si.Status.Conditions = []metav1.Condition{{Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue,
			Reason: string(mcsv1beta1.ServiceImportReasonReady), Message: "floor", LastTransitionTime: metav1.Now()}}
		write(c.Status().Patch(ctx, si, client.MergeFrom(base)))
	}
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				one(i)
			}
		}()
	}
	for i := range services {
		next <- i
	}
	close(next)
	wg.Wait()
	return int(writes.Load()), time.Since(start)
}
