package exporter

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
)

// SyncAll makes the registry hold exactly the cluster's valid exports: it compares them
// with the registry's copy and, when they differ, sends them all in one SyncExports call.
// The session calls it after every registration and periodically to verify.
func (r *Reconciler) SyncAll(ctx context.Context, generation int64) error {
	log := ctrl.LoggerFrom(ctx)
	var list mcsv1beta1.ServiceExportList
	if err := r.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("list ServiceExports: %w", err)
	}
	req := &registryv1.SyncExportsRequest{Clusterset: r.Clusterset, ClusterId: r.ClusterID}
	keys := map[int]types.NamespacedName{}
	for i := range list.Items {
		se := &list.Items[i]
		if !se.DeletionTimestamp.IsZero() {
			continue
		}
		content, _, err := r.desired(ctx, se)
		if err != nil {
			return err
		}
		if content == nil {
			continue
		}
		keys[len(req.Exports)] = client.ObjectKeyFromObject(se)
		req.Exports = append(req.Exports, content)
	}
	if verdicts, same, err := r.registryHas(ctx, req.Exports); err != nil {
		log.Error(err, "could not compare the exports with the registry's; sending them all")
	} else if same {
		// A controller restart or a new leader: the registry already holds exactly these
		// exports, so nothing is written.
		r.mu.Lock()
		r.sent = map[types.NamespacedName]*sent{}
		for i, content := range req.Exports {
			r.sent[keys[i]] = &sent{content: content, generation: generation, verdict: verdicts[keys[i]]}
		}
		verifying := r.syncedGen == generation
		r.syncedGen = generation
		r.mu.Unlock()
		if verifying {
			// A periodic check found nothing missing.
			log.V(1).Info("the registry holds the cluster's exports", "exports", len(req.Exports))
			return nil
		}
		log.Info("the registry holds the cluster's exports already; nothing sent", "exports", len(req.Exports))
		go r.Trigger(ctx, nil)
		return nil
	}
	var resp *registryv1.SyncExportsResponse
	err := r.Registry.Call(ctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		var err error
		resp, err = c.SyncExports(ctx, req)
		return err
	})
	if f := r.Metrics.ExportWrite; f != nil {
		f("sync", err == nil)
	}
	if err != nil {
		// A rejected export, or a set over one of the registry's limits, fails the whole
		// sync; the reconciles that follow send each export alone, so only the bad ones
		// (or those past the limit) are refused.
		// (A refusal with a retry hint is the registry's share of its clients, not a limit
		// of the set: the sync is tried again.)
		_, throttled := registryclient.RetryDelay(err)
		if c := status.Code(err); !throttled && (c == codes.InvalidArgument || c == codes.ResourceExhausted) {
			log.Error(err, "the registry rejected the export set; sending the exports one by one")
			r.mu.Lock()
			r.sent = map[types.NamespacedName]*sent{}
			r.mu.Unlock()
			go r.Trigger(ctx, nil)
			return nil
		}
		return fmt.Errorf("sync %d exports: %w", len(req.Exports), err)
	}
	r.mu.Lock()
	r.syncedGen = generation
	r.sent = map[types.NamespacedName]*sent{}
	for i, res := range resp.GetResults() {
		r.sent[keys[i]] = &sent{content: req.Exports[i], generation: generation, verdict: res.GetVerdict()}
	}
	r.mu.Unlock()
	log.Info("exports sent to the registry", "exports", len(req.Exports), "deleted_stale", resp.GetDeletedExports())
	go r.Trigger(ctx, nil)
	return nil
}

// registryHas reports whether the registry holds exactly these exports of this cluster, and
// if so the registry's verdict on each.
func (r *Reconciler) registryHas(ctx context.Context, want []*registryv1.ExportContent) (map[types.NamespacedName]*registryv1.ExportVerdict, bool, error) {
	return RegistryHolds(ctx, r.Registry, r.Imports, r.Clusterset, r.ClusterID, want)
}

// RegistryHolds reports whether the registry holds exactly want as clusterID's exports, and
// if so the registry's verdict on each: what a controller asks after each registration and
// every --verify-exports-every renewals before it sends its exports (the fleet simulator
// asks it the same way). The verdicts come from the import watch once it has had a
// snapshot (the exporter reads them there anyway, and it follows every change); only
// before that does it list the clusterset's imports, whose size grows with every cluster
// of the clusterset: at 1,000 clusters × 20 Services about 2 MB a call.
func RegistryHolds(ctx context.Context, reg Registry, view Imports, clusterset, clusterID string, want []*registryv1.ExportContent) (map[types.NamespacedName]*registryv1.ExportVerdict, bool, error) {
	var exports *registryv1.ListExportsResponse
	var imports *registryv1.ListImportsResponse
	fromView := view != nil && view.Synced()
	err := reg.Call(ctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		var err error
		exports, err = c.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: clusterset, ClusterId: clusterID, IncludeEndpoints: true})
		if err != nil || fromView {
			return err
		}
		imports, err = c.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: clusterset})
		return err
	})
	if registryclient.ClustersetUnknown(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if len(exports.GetExports()) != len(want) {
		return nil, false, nil
	}
	have := map[types.NamespacedName]*registryv1.Export{}
	for _, e := range exports.GetExports() {
		have[types.NamespacedName{Namespace: e.GetService().GetNamespace(), Name: e.GetService().GetName()}] = e
	}
	for _, w := range want {
		e := have[types.NamespacedName{Namespace: w.GetService().GetNamespace(), Name: w.GetService().GetName()}]
		if e == nil || !proto.Equal(e.GetSpec(), w.GetSpec()) || !slices.EqualFunc(e.GetEndpointGroups(), w.GetEndpointGroups(), equalMsg[*registryv1.EndpointGroup]) {
			return nil, false, nil
		}
	}
	verdicts := map[types.NamespacedName]*registryv1.ExportVerdict{}
	if fromView {
		for k := range have {
			if imp := view.Get(k); imp != nil {
				verdicts[k] = verdictFrom(imp, clusterID)
			}
		}
		return verdicts, true, nil
	}
	for _, imp := range imports.GetImports() {
		k := types.NamespacedName{Namespace: imp.GetService().GetNamespace(), Name: imp.GetService().GetName()}
		if have[k] != nil {
			verdicts[k] = verdictFrom(imp, clusterID)
		}
	}
	return verdicts, true, nil
}

func equalMsg[M proto.Message](a, b M) bool { return proto.Equal(a, b) }
