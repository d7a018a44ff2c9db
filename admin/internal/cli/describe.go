package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/ai-dynamo/global-discovery-mcs/admin/internal/registryrest"
	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/locality"
	"github.com/ai-dynamo/global-discovery-mcs/internal/command"
	"github.com/ai-dynamo/global-discovery-mcs/registry/merge"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// Description is what describe prints as JSON or YAML.
type Description struct {
	Clusterset string               `json:"clusterset"`
	Time       time.Time            `json:"time"`
	Clusters   []ClusterDescription `json:"clusters"`
	Exports    []ExportDescription  `json:"exports"`
	// Replication is the answering registry replica's measure of replication (only when
	// describe reads a registry: the lag is measured by registries, not stored).
	Replication *ReplicationDescription `json:"replication,omitempty"`
	// Locality is, for each Service, the tier each member cluster's importer sends its
	// traffic to, from the import the registry would merge.
	Locality []LocalityDescription `json:"locality"`
	// Unreadable are stored items no read can decode: every read skips them; remove an
	// export with delete-export, a cluster with delete-cluster.
	Unreadable []UnreadableDescription `json:"unreadable"`
}

// UnreadableDescription is a stored item that cannot be read.
type UnreadableDescription struct {
	Key       string `json:"key"`
	ClusterID string `json:"clusterId,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Reason    string `json:"reason"`
}

// ReplicationDescription is a registry replica's view of replication between regions.
type ReplicationDescription struct {
	// Region is the replica's region, whose view the lease states are.
	Region string                 `json:"region"`
	Lags   []RegionLagDescription `json:"lags"`
}

// RegionLagDescription is the replication lag measured from one region.
type RegionLagDescription struct {
	SourceRegion string  `json:"sourceRegion"`
	LagSeconds   float64 `json:"lagSeconds"`
}

// ClusterDescription is one cluster and its lease.
type ClusterDescription struct {
	ClusterID  string `json:"clusterId"`
	Region     string `json:"region"`
	LeaseState string `json:"leaseState"`
	// RenewRegion is the region whose table replica took the last renewal.
	RenewRegion  string    `json:"renewRegion,omitempty"`
	LeaseSeconds float64   `json:"leaseSeconds"`
	RenewTime    time.Time `json:"renewTime"`
	ExpireTime   time.Time `json:"expireTime"`
	RegisterTime time.Time `json:"registerTime"`
}

// ExportDescription is one export and its endpoint set.
type ExportDescription struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	ClusterID string   `json:"clusterId"`
	Type      string   `json:"type"`
	Ports     []string `json:"ports"`
	// Locality is the export's locality policy ("cluster,region"); empty: it sets none and
	// every importing controller applies its --default-locality.
	Locality       string    `json:"locality,omitempty"`
	Endpoints      int       `json:"endpoints"`
	ReadyEndpoints int       `json:"readyEndpoints"`
	Addresses      []string  `json:"addresses"`
	CreateTime     time.Time `json:"createTime"`
	UpdateTime     time.Time `json:"updateTime"`
}

// LocalityDescription is one Service's locality: its policy and the member clusters whose
// importers use each tier.
type LocalityDescription struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Policy is the import's policy, the winning (oldest) export's; when the exports set
	// none it is locality.Default, and PolicyDefault says so: a controller started with
	// another --default-locality chooses by its own.
	Policy        string `json:"policy"`
	PolicyDefault bool   `json:"policyDefault,omitempty"`
	// Tiers are the active tiers, each with the clusters whose importers use it.
	Tiers []TierDescription `json:"tiers"`
}

// TierDescription is a tier and the member clusters whose importers send a Service's
// traffic to it.
type TierDescription struct {
	Tier     string   `json:"tier"`
	Clusters []string `json:"clusters"`
}

// describeLocality computes, for each Service, the tier each participating cluster's
// importer chooses: the registry's merge of the Service's exports, then the importer's
// choice (api/locality) from each cluster's place. Zones are not known here: describe
// cannot say HintsUnavailable (the ServiceImport's Locality condition does).
func describeLocality(exports []store.Export, participants map[string]merge.Participant) ([]LocalityDescription, error) {
	def, err := locality.Parse(locality.Default)
	if err != nil {
		return nil, err
	}
	keys, byService := store.ByService(exports)
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Namespace != keys[j].Namespace {
			return keys[i].Namespace < keys[j].Namespace
		}
		return keys[i].Name < keys[j].Name
	})
	importers := slices.Sorted(maps.Keys(participants))
	out := []LocalityDescription{}
	for _, k := range keys {
		imp := merge.Service(k, byService[k], participants)
		if imp == nil {
			continue
		}
		policy := imp.GetSpec().GetLocality()
		ld := LocalityDescription{Namespace: k.Namespace, Name: k.Name, Tiers: []TierDescription{}}
		if len(policy) == 0 {
			policy, ld.PolicyDefault = def, true
		}
		ld.Policy = locality.Format(policy)
		sources := locality.SourcesOf(imp)
		byTier := map[string][]string{}
		for _, id := range importers {
			d := locality.Choose(locality.Input{Policy: policy, Cluster: id, Region: participants[id].Region, Sources: sources})
			byTier[locality.Name(d.Tier)] = append(byTier[locality.Name(d.Tier)], id)
		}
		for _, t := range []string{locality.Cluster, locality.Region, locality.Any} {
			if ids := byTier[t]; len(ids) > 0 {
				ld.Tiers = append(ld.Tiers, TierDescription{Tier: t, Clusters: ids})
			}
		}
		out = append(out, ld)
	}
	return out, nil
}

// leaseViewer is a registry: it judges leases, held ones included, and measures replication.
type leaseViewer interface {
	LeaseView(ctx context.Context, clusterset string) (registryrest.LeaseView, error)
}

// describe reads a clusterset from the store or a registry.
func describe(ctx context.Context, st registryData, clusterset string, now time.Time) (Description, error) {
	d := Description{Clusterset: clusterset, Time: now, Clusters: []ClusterDescription{}, Exports: []ExportDescription{}, Locality: []LocalityDescription{}, Unreadable: []UnreadableDescription{}}
	clusters, err := st.ListClusters(ctx, clusterset)
	if err != nil {
		return d, err
	}
	var view *registryrest.LeaseView
	if lv, ok := st.(leaseViewer); ok {
		v, err := lv.LeaseView(ctx, clusterset)
		if err != nil {
			return d, err
		}
		view = &v
		d.Replication = &ReplicationDescription{Region: v.Region, Lags: []RegionLagDescription{}}
		for region, lag := range v.Lags {
			d.Replication.Lags = append(d.Replication.Lags, RegionLagDescription{SourceRegion: region, LagSeconds: lag.Seconds()})
		}
		sort.Slice(d.Replication.Lags, func(i, j int) bool { return d.Replication.Lags[i].SourceRegion < d.Replication.Lags[j].SourceRegion })
	}
	participants := map[string]merge.Participant{}
	for _, c := range clusters {
		// Read from the store: the lease by its times alone; from a registry: as the
		// registry judges it (a lease held while replication lags included).
		state := "LEASE_STATE_EXPIRED"
		if c.Active(now) {
			state = "LEASE_STATE_ACTIVE"
		}
		if s, ok := registryState(view, c.ClusterID); ok {
			state = s
		}
		if state != registryv1.LeaseState_LEASE_STATE_EXPIRED.String() {
			participants[c.ClusterID] = merge.Participant{Region: c.Region}
		}
		d.Clusters = append(d.Clusters, ClusterDescription{
			ClusterID: c.ClusterID, Region: c.Region, LeaseState: state, RenewRegion: c.RenewRegion, LeaseSeconds: c.LeaseDuration.Seconds(),
			RenewTime: c.RenewTime, ExpireTime: c.ExpireTime(), RegisterTime: c.RegisterTime,
		})
	}
	exports, err := st.ListExports(ctx, clusterset)
	if err != nil {
		return d, err
	}
	for _, e := range exports {
		ed := ExportDescription{
			Namespace: e.Service.Namespace, Name: e.Service.Name, ClusterID: e.ClusterID,
			Type: strings.TrimPrefix(e.Spec.GetType().String(), "SERVICE_TYPE_"), Ports: []string{}, Addresses: []string{},
			CreateTime: e.CreateTime, UpdateTime: e.UpdateTime,
		}
		var tiers []string
		for _, t := range e.Spec.GetLocality() {
			tiers = append(tiers, strings.ToLower(strings.TrimPrefix(t.String(), "LOCALITY_TIER_")))
		}
		ed.Locality = strings.Join(tiers, ",")
		for _, p := range e.Spec.GetPorts() {
			proto := p.GetProtocol()
			if proto == "" {
				proto = "TCP"
			}
			ed.Ports = append(ed.Ports, fmt.Sprintf("%s/%s/%d", p.GetName(), proto, p.GetPort()))
		}
		for _, g := range e.EndpointGroups {
			for _, ep := range g.GetEndpoints() {
				ed.Endpoints++
				if c := ep.GetConditions(); c == nil || c.Ready == nil || c.GetReady() {
					ed.ReadyEndpoints++
				}
				ed.Addresses = append(ed.Addresses, ep.GetAddresses()...)
			}
		}
		sort.Strings(ed.Addresses)
		d.Exports = append(d.Exports, ed)
	}
	if d.Locality, err = describeLocality(exports, participants); err != nil {
		return d, err
	}
	bad, err := st.ListUnreadable(ctx, clusterset)
	if err != nil {
		return d, err
	}
	for _, u := range bad {
		d.Unreadable = append(d.Unreadable, UnreadableDescription{Key: u.Key, ClusterID: u.ClusterID, Namespace: u.Service.Namespace, Name: u.Service.Name, Reason: u.Reason})
	}
	return d, nil
}

func describeCmd(g *globals) *cobra.Command {
	var clusterset, output string
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "List a clusterset's clusters with their lease states, the exports and their endpoint sets",
		Example: `  mcs-admin --store=dynamodb --region=us-east-1 describe --clusterset-id=prod
  mcs-admin --region=us-east-1 describe --clusterset-id=prod -o yaml
  mcs-admin --registry-rest-url=http://localhost:8080 describe --clusterset-id=prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" && output != "yaml" {
				return command.Usagef("-o %q: must be table, json or yaml", output)
			}
			ctx := cmd.Context()
			data, _, err := g.data(ctx)
			if err != nil {
				return err
			}
			d, err := describe(ctx, data, clusterset, time.Now())
			if err != nil {
				return err
			}
			return printDescription(cmd.OutOrStdout(), d, output)
		},
	}
	alias(cmd.Flags(), &clusterset, "clusterset-id", "clusterset", "The clusterset to describe (required).")
	required(cmd, "clusterset-id")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "Output format: table, json or yaml.")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func printDescription(w io.Writer, d Description, output string) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "CLUSTERS OF %s\n", d.Clusterset)
	fmt.Fprintln(tw, "CLUSTER\tREGION\tLEASE\tRENEWED IN\tEXPIRES\tREGISTERED")
	for _, c := range d.Clusters {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.ClusterID, dash(c.Region), c.LeaseState, dash(c.RenewRegion), c.ExpireTime.Format(time.RFC3339), c.RegisterTime.Format(time.RFC3339))
	}
	if r := d.Replication; r != nil && len(r.Lags) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintf(tw, "REPLICATION (lag by which the registry replica in %s judges leases)\n", dash(r.Region))
		fmt.Fprintln(tw, "SOURCE REGION\tLAG")
		for _, l := range r.Lags {
			fmt.Fprintf(tw, "%s\t%.1fs\n", l.SourceRegion, l.LagSeconds)
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "EXPORTS")
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tCLUSTER\tTYPE\tPORTS\tLOCALITY\tREADY/ENDPOINTS\tCREATED")
	for _, e := range d.Exports {
		locality := e.Locality
		if locality == "" {
			locality = "(default)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", e.Namespace, e.Name, e.ClusterID, e.Type, strings.Join(e.Ports, ","), locality, e.ReadyEndpoints, e.Endpoints, e.CreateTime.Format(time.RFC3339))
	}
	if len(d.Locality) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "LOCALITY (the tier each member cluster's importer sends the Service's traffic to)")
		fmt.Fprintln(tw, "NAMESPACE\tNAME\tPOLICY\tTIER\tCLUSTERS")
		for _, l := range d.Locality {
			policy := l.Policy
			if l.PolicyDefault {
				policy += " (default)"
			}
			for _, t := range l.Tiers {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Namespace, l.Name, policy, t.Tier, strings.Join(t.Clusters, ","))
			}
		}
	}
	if len(d.Unreadable) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "UNREADABLE (skipped by every read; remove with delete-export or delete-cluster)")
		fmt.Fprintln(tw, "KEY\tCLUSTER\tREASON")
		for _, u := range d.Unreadable {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Key, dash(u.ClusterID), u.Reason)
		}
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// registryState is the registry's judgement of a cluster's lease, when describe reads a
// registry (view is nil when it reads the store).
func registryState(view *registryrest.LeaseView, id string) (string, bool) {
	if view == nil {
		return "", false
	}
	s, ok := view.States[id]
	return s.String(), ok
}
