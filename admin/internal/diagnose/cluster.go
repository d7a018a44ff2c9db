package diagnose

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// Member is one member cluster, reached through a kubeconfig context.
type Member struct {
	Context string
	Config  *rest.Config
	Client  client.Client
}

// Options say what to check.
type Options struct {
	Clusterset string
	// ControllerNamespace, ServiceAccount and LeaderElectionID locate the controller as
	// the chart installs it.
	ControllerNamespace, ServiceAccount, LeaderElectionID string
	// Registry, when its URL is set, is checked too, and each cluster's lease in it.
	Registry RegistryOptions
	// ClientCertSecret names the Secret of the controller's client certificate; empty: the
	// one the chart mounts, if any.
	ClientCertSecret string
	// GDS, with RouterService set, adds the Global Discovery Service's counts.
	GDS GDSOptions
	Now func() time.Time
}

// permission is one thing the controller must be allowed to do (the chart's RBAC).
type permission struct {
	group, resource, verb string
	// namespaced: checked in the controller's namespace (leader election) only.
	namespaced bool
}

// controllerPermissions are what the controller cannot work without; the chart grants
// them (templates/controller.yaml).
var controllerPermissions = []permission{
	{"multicluster.x-k8s.io", "serviceexports", "list", false},
	{"multicluster.x-k8s.io", "serviceexports", "watch", false},
	{"multicluster.x-k8s.io", "serviceexports", "update", false},
	{"multicluster.x-k8s.io", "serviceexports/status", "patch", false},
	{"multicluster.x-k8s.io", "serviceimports", "list", false},
	{"multicluster.x-k8s.io", "serviceimports", "create", false},
	{"multicluster.x-k8s.io", "serviceimports", "patch", false},
	{"multicluster.x-k8s.io", "serviceimports", "delete", false},
	{"multicluster.x-k8s.io", "serviceimports/status", "patch", false},
	{"", "services", "list", false},
	{"", "services", "create", false},
	{"", "services", "update", false},
	{"discovery.k8s.io", "endpointslices", "list", false},
	{"discovery.k8s.io", "endpointslices", "create", false},
	{"discovery.k8s.io", "endpointslices", "update", false},
	{"discovery.k8s.io", "endpointslices", "delete", false},
	{"", "namespaces", "list", false},
	{"", "nodes", "list", false},
	{"", "nodes", "watch", false},
	{"events.k8s.io", "events", "create", false},
	{"coordination.k8s.io", "leases", "get", true},
	{"coordination.k8s.io", "leases", "update", true},
}

// checkCluster runs every check of one member cluster.
func checkCluster(ctx context.Context, m Member, o Options, reg *registryView) []Result {
	var out []Result
	add := func(check string, s Status, detail, fix string) {
		out = append(out, Result{Target: m.Context, Check: check, Status: s, Detail: detail, Fix: fix})
	}
	crds(ctx, m, add)
	controller(ctx, m, o, add)
	if reg != nil {
		registryLease(ctx, m, reg, add)
		if c, ok := reg.clusters[clusterID(ctx, m)]; ok {
			r := skewResult(m.Context, c.GetControllerVersion(), reg.version)
			add(r.Check, r.Status, r.Detail, r.Fix)
		}
	}
	exports(ctx, m, add)
	imports(ctx, m, add)
	localityCheck(ctx, m, add)
	permissions(ctx, m, o, add)
	propagation(ctx, m, o, add)
	clientCertificate(ctx, m, o, add)
	gds(ctx, m, o, add)
	if r, ok := apiClock(ctx, m, o.Now); ok {
		out = append(out, r)
	}
	return out
}

type addFunc func(check string, s Status, detail, fix string)

// crds: the ServiceExport and ServiceImport CRDs serve multicluster.x-k8s.io/v1beta1.
func crds(ctx context.Context, m Member, add addFunc) {
	const fix = "install the mcs-api v0.5.2 CRDs (the chart's crds.install=true, or kubectl apply -f charts/global-discovery-mcs/files/crds); replace a CRD that serves only v1alpha1"
	var bad []string
	for _, name := range []string{"serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := m.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		served := false
		var versions []string
		for _, v := range crd.Spec.Versions {
			if v.Served {
				versions = append(versions, v.Name)
				served = served || v.Name == "v1beta1"
			}
		}
		if !served {
			bad = append(bad, fmt.Sprintf("%s serves %s, not v1beta1", name, strings.Join(versions, ", ")))
		}
	}
	if len(bad) > 0 {
		add("crds", Fail, strings.Join(bad, "; "), fix)
		return
	}
	add("crds", OK, "ServiceExport and ServiceImport serve v1beta1", "")
}

// controller: the leader-election Lease is held and renewed.
func controller(ctx context.Context, m Member, o Options, add addFunc) {
	l := &coordinationv1.Lease{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: o.ControllerNamespace, Name: o.LeaderElectionID}, l)
	fix := fmt.Sprintf("install the controller (helm install ... --set controller.enabled=true), then kubectl -n %s get pods and logs of the controller", o.ControllerNamespace)
	if apierrors.IsNotFound(err) {
		add("controller", Fail, fmt.Sprintf("no leader-election Lease %s/%s: no controller has run here", o.ControllerNamespace, o.LeaderElectionID), fix)
		return
	}
	if err != nil {
		add("controller", Fail, "read the leader-election Lease: "+err.Error(), "give this context the right to get leases in "+o.ControllerNamespace)
		return
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	dur := 15 * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if holder == "" || l.Spec.RenewTime == nil {
		add("controller", Fail, "the leader-election Lease has no holder: no controller replica leads", fix)
		return
	}
	age := o.Now().Sub(l.Spec.RenewTime.Time)
	if age > 2*dur {
		add("controller", Fail, fmt.Sprintf("leader %s last renewed %s ago (lease %s): the controller is not running", holder, age.Round(time.Second), dur), fix)
		return
	}
	add("controller", OK, fmt.Sprintf("leader %s, renewed %s ago", holder, max(age, 0).Round(time.Second)), "")
}

// clusterID is the cluster's id: its KEP-2149 ClusterProperty id.k8s.io, else the context name.
func clusterID(ctx context.Context, m Member) string {
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(schema.GroupVersionKind{Group: "about.k8s.io", Version: "v1alpha1", Kind: "ClusterProperty"})
	if err := m.Client.Get(ctx, client.ObjectKey{Name: "id.k8s.io"}, p); err == nil {
		if v, _, _ := unstructured.NestedString(p.Object, "spec", "value"); v != "" {
			return v
		}
	}
	return m.Context
}

// registryLease: the registry holds the cluster with an active lease.
func registryLease(ctx context.Context, m Member, reg *registryView, add addFunc) {
	if reg.err != nil {
		add("registry-lease", Fail, "the registry could not be read (see registry connection)", "mend the registry connection first")
		return
	}
	id := clusterID(ctx, m)
	c, ok := reg.clusters[id]
	logs := "the controller's log names the cause of its registry errors with a hint (registry session): TLS, the URL, the network path"
	if !ok {
		add("registry-lease", Fail, fmt.Sprintf("the registry holds no cluster %q", id), logs)
		return
	}
	switch c.GetLease().GetState() {
	case registryv1.LeaseState_LEASE_STATE_ACTIVE:
		add("registry-lease", OK, fmt.Sprintf("cluster %s active, renewed %s", id, c.GetLease().GetRenewTime().AsTime().UTC().Format(time.RFC3339)), "")
	case registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION:
		add("registry-lease", Warn, fmt.Sprintf("cluster %s held while replication from %s lags %s", id, c.GetLease().GetRenewRegion(), c.GetLease().GetReplicationLag().AsDuration().Round(time.Second)),
			"DynamoDB Global Table replication is slow or stalled: mcs_registry_replication_lag_seconds and the table's ReplicationLatency")
	default:
		add("registry-lease", Fail, fmt.Sprintf("cluster %s: lease expired %s; its endpoints are out of every import", id, c.GetLease().GetExpireTime().AsTime().UTC().Format(time.RFC3339)), logs)
	}
}

// exports: no ServiceExport in conflict or failing.
func exports(ctx context.Context, m Member, add addFunc) {
	var list mcsv1beta1.ServiceExportList
	if err := m.Client.List(ctx, &list); err != nil {
		add("exports", Fail, "list ServiceExports: "+err.Error(), "check the crds result")
		return
	}
	var conflicts, failing []string
	for _, e := range list.Items {
		name := e.Namespace + "/" + e.Name
		if c := meta.FindStatusCondition(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)); c != nil && c.Status == "True" {
			conflicts = append(conflicts, fmt.Sprintf("%s (%s)", name, c.Message))
		}
		if c := meta.FindStatusCondition(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady)); c != nil && c.Status == "False" {
			failing = append(failing, fmt.Sprintf("%s (%s: %s)", name, c.Reason, c.Message))
		}
	}
	switch {
	case len(failing) > 0:
		add("exports", Fail, fmt.Sprintf("%d of %d not Ready: %s", len(failing), len(list.Items), strings.Join(limit(failing), "; ")),
			"kubectl describe serviceexport: the ExportFailed Events name the field or the limit")
	case len(conflicts) > 0:
		add("exports", Warn, fmt.Sprintf("%d of %d in conflict: %s", len(conflicts), len(list.Items), strings.Join(limit(conflicts), "; ")),
			"make the Services agree in every cluster (ports, type, session affinity); the oldest export's spec wins meanwhile")
	default:
		add("exports", OK, fmt.Sprintf("%d ServiceExport(s), none in conflict", len(list.Items)), "")
	}
}

// imports: no ServiceImport with refused endpoints, held endpoints or held clusters.
func imports(ctx context.Context, m Member, add addFunc) {
	var list mcsv1beta1.ServiceImportList
	if err := m.Client.List(ctx, &list); err != nil {
		add("imports", Fail, "list ServiceImports: "+err.Error(), "check the crds result")
		return
	}
	var refused, held []string
	for _, i := range list.Items {
		name := i.Namespace + "/" + i.Name
		if c := meta.FindStatusCondition(i.Status.Conditions, "EndpointsRefused"); c != nil && c.Status == "True" {
			refused = append(refused, fmt.Sprintf("%s (%s)", name, c.Message))
		}
		for _, typ := range []string{"EndpointsHeld", "ReplicationHeld"} {
			if c := meta.FindStatusCondition(i.Status.Conditions, typ); c != nil && c.Status == "True" {
				held = append(held, fmt.Sprintf("%s %s (%s)", name, typ, c.Message))
			}
		}
	}
	switch {
	case len(refused) > 0:
		add("imports", Fail, fmt.Sprintf("the API server refuses endpoints of %d import(s): %s", len(refused), strings.Join(limit(refused), "; ")),
			"an admission webhook, policy or quota refuses the imported EndpointSlices: the condition's message quotes the API server")
	case len(held) > 0:
		add("imports", Warn, fmt.Sprintf("%d import(s) hold endpoints: %s", len(held), strings.Join(limit(held), "; ")),
			"a registry restart (EndpointsHeld) or a replication lag (ReplicationHeld) that lasts: check the registry and the source clusters' controllers")
	default:
		add("imports", OK, fmt.Sprintf("%d ServiceImport(s), none held or refused", len(list.Items)), "")
	}
}

// canaryPattern reads one source cluster's figures from the canary's summary.
var canaryPattern = regexp.MustCompile(`(\S+) p50=([0-9.]+)s p99=([0-9.]+)s n=([0-9]+)`)

// slowPropagation is the p99 reported as a warning, the MCSPropagationSlow alert's threshold.
const slowPropagation = 5.0

// propagation: the canary's figures (controller.canary.enabled), when it runs.
func propagation(ctx context.Context, m Member, o Options, add addFunc) {
	se := &mcsv1beta1.ServiceExport{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: o.ControllerNamespace, Name: "mcs-canary"}, se); err != nil {
		return // no canary here
	}
	sum := se.Annotations["multicluster.dynamo.nvidia.com/propagation"]
	if sum == "" {
		add("propagation", Warn, "the canary runs but has measured no other cluster yet", "enable controller.canary in every member cluster")
		return
	}
	var slow []string
	for _, f := range canaryPattern.FindAllStringSubmatch(sum, -1) {
		if p99, err := strconv.ParseFloat(f[3], 64); err == nil && p99 > slowPropagation {
			slow = append(slow, f[1])
		}
	}
	if len(slow) > 0 {
		add("propagation", Warn, "canary, last 100 changes per source: "+sum,
			fmt.Sprintf("exports of %s take more than %.0f s (p99) to arrive: check those clusters' controllers, the registry and this cluster's API server", strings.Join(slow, ", "), slowPropagation))
		return
	}
	add("propagation", OK, "canary, last 100 changes per source: "+sum, "")
}

// permissions: the controller's ServiceAccount may do what the controller does.
func permissions(ctx context.Context, m Member, o Options, add addFunc) {
	user := fmt.Sprintf("system:serviceaccount:%s:%s", o.ControllerNamespace, o.ServiceAccount)
	var missing []string
	for _, p := range controllerPermissions {
		res, sub, _ := strings.Cut(p.resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + o.ControllerNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: p.group, Resource: res, Subresource: sub, Verb: p.verb,
			},
		}}
		if p.namespaced {
			sar.Spec.ResourceAttributes.Namespace = o.ControllerNamespace
		}
		if err := m.Client.Create(ctx, sar); err != nil {
			add("permissions", Fail, "SubjectAccessReview: "+err.Error(), "give this context the right to create subjectaccessreviews")
			return
		}
		if !sar.Status.Allowed {
			g := p.group
			if g == "" {
				g = "core"
			}
			missing = append(missing, fmt.Sprintf("%s %s.%s", p.verb, p.resource, g))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		add("permissions", Fail, fmt.Sprintf("%s may not: %s", user, strings.Join(missing, ", ")),
			"install the chart's controller RBAC (the ClusterRole and Role of templates/controller.yaml) for that ServiceAccount")
		return
	}
	add("permissions", OK, fmt.Sprintf("%s has the %d permissions the controller needs", user, len(controllerPermissions)), "")
}

// apiClock compares the API server's clock with this machine's.
func apiClock(ctx context.Context, m Member, now func() time.Time) (Result, bool) {
	hc, err := rest.HTTPClientFor(m.Config)
	if err != nil {
		return Result{}, false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(m.Config.Host, "/")+"/version", nil)
	if err != nil {
		return Result{}, false
	}
	sent := now()
	resp, err := hc.Do(req)
	if err != nil {
		return Result{}, false
	}
	received := now()
	_ = resp.Body.Close()
	d, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return Result{}, false
	}
	return clockResult(m.Context, d, sent, received), true
}

// limit keeps the first five items of a list and counts the rest.
func limit(items []string) []string {
	if len(items) <= 5 {
		return items
	}
	return append(items[:5:5], fmt.Sprintf("and %d more", len(items)-5))
}
