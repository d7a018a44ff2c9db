package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

func TestWriteCompact(t *testing.T) {
	for _, doc := range []string{
		`{}`,
		`{"a": 1, "b" : [1, 2,	3]}`,
		"{\n  \"s\": \"a b\\\" c\\\\\",\n  \"t\": \" \"\n}",
		`{"long": "` + string(bytes.Repeat([]byte("x y "), 20000)) + `", "n": null}`,
	} {
		var got, want bytes.Buffer
		if err := writeCompact(&got, []byte(doc)); err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&want, []byte(doc)); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("writeCompact(%.60q) = %.80q, want %.80q", doc, got.String(), want.String())
		}
	}
}

// TestBadField: the path of the field protojson refuses, through nested messages and lists.
func TestBadField(t *testing.T) {
	opts := protojson.UnmarshalOptions{DiscardUnknown: true}
	md := (&registryv1.SyncExportsRequest{}).ProtoReflect().Descriptor()
	reg := (&registryv1.RegisterClusterRequest{}).ProtoReflect().Descriptor()
	for _, tc := range []struct {
		name string
		md   protoreflect.MessageDescriptor
		doc  string
		want string
	}{
		{"a Duration", reg, `{"clusterId":"a","leaseDuration":"abc"}`, "leaseDuration"},
		{"proto name", reg, `{"lease_duration":1}`, "lease_duration"},
		{"nested in a list", md, `{"exports":[{},{"spec":{"ports":[{"port":1},{"port":"x"}]}}]}`, "exports[1].spec.ports[1].port"},
		{"a list that is not one", md, `{"exports":{}}`, "exports"},
		{"unknown fields are no one's fault", md, `{"nope":1,"exports":[]}`, ""},
		{"not an object", md, `[1]`, ""},
	} {
		if got := badField(opts, tc.md, []byte(tc.doc), 0); got != tc.want {
			t.Errorf("%s: badField = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestJSONCost: a body of millions of empty objects is refused before it is decoded; a body
// of 50,000 honest endpoints (the default per-cluster quota) is not.
func TestJSONCost(t *testing.T) {
	tiny := `{"exports":[{"endpointGroups":[{"endpoints":[` + strings.TrimSuffix(strings.Repeat(`{},`, 3_000_000), ",") + `]}]}]}`
	if err := checkJSONCost([]byte(tiny)); err == nil || !strings.Contains(err.Error(), "would allocate more than") {
		t.Errorf("%d bytes of empty endpoints: %v; want refused", len(tiny), err)
	}
	var b strings.Builder
	b.WriteString(`{"exports":[{"service":{"namespace":"dynamo","name":"x"},"endpointGroups":[{"addressType":"IPv4","endpoints":[`)
	for i := range 50000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"addresses":["10.0.%d.%d"],"conditions":{"ready":true},"hostname":"pod-%d","zone":"a"}`, i>>8&255, i&255, i)
	}
	b.WriteString(`]}]}]}`)
	if err := checkJSONCost([]byte(b.String())); err != nil {
		t.Errorf("an honest body of 50,000 endpoints: %v", err)
	}
	if err := checkJSONCost([]byte(`{"s":"{{{{{{{{{{,,,,,,"}`)); err != nil {
		t.Errorf("braces inside a string: %v", err)
	}
}
