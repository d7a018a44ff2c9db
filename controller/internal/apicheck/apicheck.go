// Package apicheck verifies at start-up that the cluster serves the API versions the
// controller uses, so a cluster with old CRDs gets an error that names the CRD and the
// remedy instead of controller-runtime's generic "no matches for kind".
package apicheck

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Discovery is the part of the discovery client the check reads.
type Discovery interface {
	ServerGroups() (*metav1.APIGroupList, error)
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// Requirement is one API group version and the resources the controller needs in it.
type Requirement struct {
	Group, Version string
	// Resources are plural resource names, for example "serviceexports".
	Resources []string
	// Remedy tells the user how to install what is missing.
	Remedy string
}

// MCS is what the controller needs: the mcs-api v1beta1 ServiceExport and ServiceImport.
var MCS = Requirement{
	Group: "multicluster.x-k8s.io", Version: "v1beta1",
	Resources: []string{"serviceexports", "serviceimports"},
	Remedy: "install the mcs-api v0.5.2 CRDs, which serve v1alpha1 and v1beta1 " +
		"(the chart's crds.install=true, or kubectl apply --server-side -f charts/global-discovery-mcs/files/crds/)",
}

// Check returns an error naming each CRD of the requirement the cluster does not serve at
// its version, the versions it serves instead, and the remedy.
func Check(d Discovery, r Requirement) error {
	gv := r.Group + "/" + r.Version
	served := map[string]bool{}
	list, err := d.ServerResourcesForGroupVersion(gv)
	switch {
	case err == nil:
		for _, res := range list.APIResources {
			served[res.Name] = true
		}
	case apierrors.IsNotFound(err):
	default:
		return fmt.Errorf("discover %s: %w", gv, err)
	}
	var missing []string
	for _, res := range r.Resources {
		if !served[res] {
			missing = append(missing, res)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	others, err := otherVersions(d, r)
	if err != nil {
		return err
	}
	var msgs []string
	for _, res := range missing {
		crd := res + "." + r.Group
		if vs := others[res]; len(vs) > 0 {
			msgs = append(msgs, fmt.Sprintf("CRD %s serves %s but not %s", crd, strings.Join(vs, ", "), r.Version))
		} else {
			msgs = append(msgs, fmt.Sprintf("CRD %s is not installed", crd))
		}
	}
	return errors.New("the cluster does not serve " + gv + ": " + strings.Join(msgs, "; ") + ": " + r.Remedy)
}

// otherVersions returns, per resource of r, the other versions of r's group that serve it.
func otherVersions(d Discovery, r Requirement) (map[string][]string, error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return nil, fmt.Errorf("discover API groups: %w", err)
	}
	out := map[string][]string{}
	for _, g := range groups.Groups {
		if g.Name != r.Group {
			continue
		}
		for _, v := range g.Versions {
			if v.Version == r.Version {
				continue
			}
			list, err := d.ServerResourcesForGroupVersion(v.GroupVersion)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("discover %s: %w", v.GroupVersion, err)
			}
			for _, res := range list.APIResources {
				if slices.Contains(r.Resources, res.Name) {
					out[res.Name] = append(out[res.Name], v.Version)
				}
			}
		}
	}
	return out, nil
}
