package app

import (
	"bytes"
	"encoding/json"
	"testing"
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
