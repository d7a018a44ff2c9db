package diagnose

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery"
)

// GDSOptions name the Global Router Service the Global Discovery Service looks for; with
// RouterService set, diagnose counts the pools and routers it would find in each cluster.
type GDSOptions struct {
	RouterNamespace, RouterService, RouterPortName string
}

// clientCertificate: the expiry of the controller's client certificate for the registry,
// from the Secret the flag names or the chart mounts (the Deployment's client-cert volume).
func clientCertificate(ctx context.Context, m Member, o Options, add addFunc) {
	name := o.ClientCertSecret
	if name == "" {
		var deps appsv1.DeploymentList
		if err := m.Client.List(ctx, &deps, client.InNamespace(o.ControllerNamespace), client.MatchingLabels{"app.kubernetes.io/component": "controller"}); err != nil {
			return
		}
		for _, d := range deps.Items {
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == "client-cert" && v.Secret != nil {
					name = v.Secret.SecretName
				}
			}
		}
	}
	if name == "" {
		return // no client certificate: the registry does not require one
	}
	const fix = "renew the controller's client certificate (controller.registryTlsClientCert.secretName; cert-manager: kubectl describe certificate); the controller reloads it without a restart"
	sec := &corev1.Secret{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: o.ControllerNamespace, Name: name}, sec); err != nil {
		add("client-certificate", Fail, fmt.Sprintf("Secret %s/%s: %v", o.ControllerNamespace, name, err), "create the Secret the controller mounts, or give this context the right to read it")
		return
	}
	block, _ := pem.Decode(sec.Data[corev1.TLSCertKey])
	if block == nil {
		add("client-certificate", Fail, fmt.Sprintf("Secret %s/%s holds no PEM certificate in %s", o.ControllerNamespace, name, corev1.TLSCertKey), fix)
		return
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		add("client-certificate", Fail, fmt.Sprintf("Secret %s/%s: %v", o.ControllerNamespace, name, err), fix)
		return
	}
	r := expiryResult(Result{}, c, o.Now(), fix)
	add("client-certificate", r.Status, r.Detail, r.Fix)
}

// gds: the pools and routers the Global Discovery Service finds in this cluster's imported
// EndpointSlices, computed by its own library.
func gds(ctx context.Context, m Member, o Options, add addFunc) {
	if o.GDS.RouterService == "" {
		return
	}
	cfg := discovery.Config{Mode: discovery.ModeMCS, RouterNamespace: o.GDS.RouterNamespace, RouterService: o.GDS.RouterService, RouterPortName: o.GDS.RouterPortName}
	if err := cfg.Validate(); err != nil {
		add("gds", Fail, err.Error(), "give --gds-router-namespace, --gds-router-service and --gds-router-port-name as the Global Discovery Service has them")
		return
	}
	var list discoveryv1.EndpointSliceList
	if err := m.Client.List(ctx, &list, client.HasLabels{discovery.LabelServiceName, discovery.LabelSourceCluster}); err != nil {
		add("gds", Fail, "list the imported EndpointSlices: "+err.Error(), "give this context the right to list endpointslices")
		return
	}
	slices := make([]*discoveryv1.EndpointSlice, len(list.Items))
	for i := range list.Items {
		slices[i] = &list.Items[i]
	}
	snap := discovery.Build(cfg, slices)
	detail := fmt.Sprintf("%d pool(s), %d router(s)", len(snap.Pools), len(snap.Routers))
	switch {
	case len(snap.Problems) > 0:
		add("gds", Warn, detail+": "+strings.Join(limit(snap.Problems), "; "), "make the Global Router's Service, its port name and the pools' Service names agree with the Global Discovery Service's flags")
	case len(snap.Routers) == 0:
		add("gds", Warn, detail, fmt.Sprintf("export the Global Router Service %s/%s from the clusters that run it", o.GDS.RouterNamespace, o.GDS.RouterService))
	default:
		add("gds", OK, detail, "")
	}
}
