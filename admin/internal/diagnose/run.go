package diagnose

import (
	"context"
	"time"
)

// Run checks the registry (when its URL is set), then every member cluster, in order.
func Run(ctx context.Context, members []Member, o Options) Report {
	if o.Now == nil {
		o.Now = time.Now
	}
	r := Report{Time: o.Now().UTC()}
	var reg *registryView
	if o.Registry.URL != "" {
		results, view := checkRegistry(ctx, o.Registry, o.Clusterset, o.Now)
		r.Results = append(r.Results, results...)
		reg = &view
	}
	for _, m := range members {
		r.Results = append(r.Results, checkCluster(ctx, m, o, reg)...)
	}
	return r
}
