package apicheck

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// served maps group versions to the resources they serve.
type served map[string][]string

func (s served) ServerGroups() (*metav1.APIGroupList, error) {
	byGroup := map[string]*metav1.APIGroup{}
	var list metav1.APIGroupList
	for gv := range s {
		g, v, _ := strings.Cut(gv, "/")
		if byGroup[g] == nil {
			list.Groups = append(list.Groups, metav1.APIGroup{Name: g})
			byGroup[g] = &list.Groups[len(list.Groups)-1]
		}
		byGroup[g].Versions = append(byGroup[g].Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: v})
	}
	return &list, nil
}

func (s served) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	res, ok := s[gv]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	list := &metav1.APIResourceList{GroupVersion: gv}
	for _, r := range res {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r})
	}
	return list, nil
}

type failing struct{ served }

func (failing) ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error) {
	return nil, errors.New("connection refused")
}

func TestCheck(t *testing.T) {
	both := []string{"serviceexports", "serviceimports"}
	tests := []struct {
		name string
		d    Discovery
		want []string // substrings of the error; none: no error
	}{
		{"v1beta1 served", served{"multicluster.x-k8s.io/v1alpha1": both, "multicluster.x-k8s.io/v1beta1": both}, nil},
		{"only v1beta1", served{"multicluster.x-k8s.io/v1beta1": both}, nil},
		{"v1alpha1 only", served{"multicluster.x-k8s.io/v1alpha1": both}, []string{
			"does not serve multicluster.x-k8s.io/v1beta1",
			"CRD serviceexports.multicluster.x-k8s.io serves v1alpha1 but not v1beta1",
			"CRD serviceimports.multicluster.x-k8s.io serves v1alpha1 but not v1beta1",
			"mcs-api v0.5.2 CRDs", "crds.install=true"}},
		{"one CRD old", served{"multicluster.x-k8s.io/v1alpha1": {"serviceimports"}, "multicluster.x-k8s.io/v1beta1": {"serviceexports"}}, []string{
			"CRD serviceimports.multicluster.x-k8s.io serves v1alpha1 but not v1beta1"}},
		{"none installed", served{"apps/v1": {"deployments"}}, []string{
			"CRD serviceexports.multicluster.x-k8s.io is not installed", "CRD serviceimports.multicluster.x-k8s.io is not installed"}},
		{"discovery fails", failing{}, []string{"discover multicluster.x-k8s.io/v1beta1: connection refused"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.d, MCS)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check: no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.name == "one CRD old" && strings.Contains(err.Error(), "serviceexports") {
				t.Errorf("error %q names the CRD that is served", err)
			}
		})
	}
}
