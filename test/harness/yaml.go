package harness

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// DecodeYAMLFile reads a multi-document YAML file into objects, skipping empty documents.
func DecodeYAMLFile(tb testing.TB, path string) []*unstructured.Unstructured {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	return DecodeYAML(tb, path, raw)
}

// DecodeYAML reads multi-document YAML (from source, named in errors) into objects,
// skipping empty documents.
func DecodeYAML(tb testing.TB, source string, raw []byte) []*unstructured.Unstructured {
	tb.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			tb.Fatalf("harness: decode %s: %v", source, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
