// Package identity resolves who this cluster is in the clusterset: the clusterset and
// cluster ids (flags, else the KEP-2149 ClusterProperty objects) and the region (flag, else
// the most common topology.kubernetes.io/region node label).
package identity

import (
	"context"
	"fmt"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterProperty names of KEP-2149.
const (
	ClustersetProperty = "clusterset.k8s.io"
	ClusterIDProperty  = "cluster.clusterset.k8s.io"
	// RegionLabel is the well-known node label the region is read from.
	RegionLabel = "topology.kubernetes.io/region"
)

// ClusterPropertyGVK is the ClusterProperty kind, read unstructured.
var ClusterPropertyGVK = schema.GroupVersionKind{Group: "about.k8s.io", Version: "v1alpha1", Kind: "ClusterProperty"}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Identity is this cluster's place in the clusterset.
type Identity struct {
	Clusterset string
	ClusterID  string
	Region     string
	// Sources says where each value came from, for the start-up log.
	Sources map[string]string
}

// Resolve fills the identity from the flags, else from the cluster. reader must be able to
// get ClusterProperties and list Nodes.
func Resolve(ctx context.Context, reader client.Reader, clustersetFlag, clusterIDFlag, regionFlag string) (Identity, error) {
	id := Identity{Sources: map[string]string{}}
	var err error
	if id.Clusterset, id.Sources["clusterset"], err = value(ctx, reader, clustersetFlag, "--clusterset-id", ClustersetProperty); err != nil {
		return id, err
	}
	if id.ClusterID, id.Sources["cluster"], err = value(ctx, reader, clusterIDFlag, "--cluster-id", ClusterIDProperty); err != nil {
		return id, err
	}
	if regionFlag != "" {
		id.Region, id.Sources["region"] = regionFlag, "--region"
		return id, nil
	}
	var nodes corev1.NodeList
	if err := reader.List(ctx, &nodes); err != nil {
		return id, fmt.Errorf("region: --region is not set and listing Nodes for their %s label failed: %w", RegionLabel, err)
	}
	id.Region = MostCommonRegion(nodes.Items)
	id.Sources["region"] = "node label " + RegionLabel
	return id, nil
}

func value(ctx context.Context, reader client.Reader, flagValue, flagName, property string) (string, string, error) {
	if flagValue != "" {
		if !dnsLabel.MatchString(flagValue) || len(flagValue) > 63 {
			return "", "", fmt.Errorf("%s %q: must be a DNS label (lower-case letters, digits and '-', at most 63 characters)", flagName, flagValue)
		}
		return flagValue, flagName, nil
	}
	cp := &unstructured.Unstructured{}
	cp.SetGroupVersionKind(ClusterPropertyGVK)
	where := fmt.Sprintf("%s is not set and ClusterProperty %s", flagName, property)
	if err := reader.Get(ctx, client.ObjectKey{Name: property}, cp); err != nil {
		if apierrors.IsNotFound(err) || isNoKind(err) {
			return "", "", fmt.Errorf("%s does not exist: set %s or create the ClusterProperty", where, flagName)
		}
		return "", "", fmt.Errorf("%s could not be read: %w", where, err)
	}
	v, _, _ := unstructured.NestedString(cp.Object, "spec", "value")
	if !dnsLabel.MatchString(v) || len(v) > 63 {
		return "", "", fmt.Errorf("ClusterProperty %s has spec.value %q: must be a DNS label (lower-case letters, digits and '-', at most 63 characters)", property, v)
	}
	return v, "ClusterProperty " + property, nil
}

// isNoKind reports that the cluster does not serve ClusterProperty at all.
func isNoKind(err error) bool { return meta.IsNoMatchError(err) }

// MostCommonRegion returns the most common region label of the nodes; a tie goes to the
// name that sorts first, so every replica agrees. Empty when no node has the label.
func MostCommonRegion(nodes []corev1.Node) string {
	count := map[string]int{}
	for _, n := range nodes {
		if r := n.Labels[RegionLabel]; r != "" {
			count[r]++
		}
	}
	regions := make([]string, 0, len(count))
	for r := range count {
		regions = append(regions, r)
	}
	sort.Slice(regions, func(i, j int) bool {
		if count[regions[i]] != count[regions[j]] {
			return count[regions[i]] > count[regions[j]]
		}
		return regions[i] < regions[j]
	})
	if len(regions) == 0 {
		return ""
	}
	return regions[0]
}
