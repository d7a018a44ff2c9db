package diagnose

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// maxZoneHints is the most zones an EndpointSlice hint names (discovery.k8s.io/v1).
const maxZoneHints = 8

// localityCheck: kube-proxy can follow the locality hints on every node (each has a zone,
// at most 8 zones), and no import has fallen back from its first tier.
func localityCheck(ctx context.Context, m Member, add addFunc) {
	var nodes metav1.PartialObjectMetadataList
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := m.Client.List(ctx, &nodes); err != nil {
		add("locality", Fail, "list Nodes: "+err.Error(), "give this context the right to list nodes")
		return
	}
	var zoneless []string
	zones := map[string]bool{}
	for _, n := range nodes.Items {
		if z := n.Labels[corev1.LabelTopologyZone]; z != "" {
			zones[z] = true
		} else {
			zoneless = append(zoneless, n.Name)
		}
	}
	var problems []string
	if len(zoneless) > 0 {
		sort.Strings(zoneless)
		problems = append(problems, fmt.Sprintf("%d of %d nodes have no %s label (%s): kube-proxy on them ignores the locality hints and sends imported traffic to every cluster",
			len(zoneless), len(nodes.Items), corev1.LabelTopologyZone, strings.Join(limit(zoneless), ", ")))
	}
	if len(zones) > maxZoneHints {
		problems = append(problems, fmt.Sprintf("the nodes are in %d zones and a hint names at most %d: kube-proxy in the others ignores the locality hints", len(zones), maxZoneHints))
	}
	var list mcsv1beta1.ServiceImportList
	if err := m.Client.List(ctx, &list); err == nil {
		var fallen []string
		for _, i := range list.Items {
			if c := meta.FindStatusCondition(i.Status.Conditions, "Locality"); c != nil && c.Status == "False" && c.Reason != "HintsUnavailable" {
				fallen = append(fallen, fmt.Sprintf("%s/%s (%s)", i.Namespace, i.Name, c.Message))
			}
		}
		if len(fallen) > 0 {
			problems = append(problems, fmt.Sprintf("%d import(s) send traffic past their first locality tier: %s", len(fallen), strings.Join(limit(fallen), "; ")))
		}
	}
	if len(problems) > 0 {
		add("locality", Warn, strings.Join(problems, "; "),
			"label every node with its zone (the cloud provider usually does); for a fallback, check the pods of the first tier")
		return
	}
	add("locality", OK, fmt.Sprintf("%d node(s) in %d zone(s), every one labelled; no import past its first tier", len(nodes.Items), len(zones)), "")
}
