package release

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// dockerfileImage is what the Dockerfile's final stage puts in the image.
type dockerfileImage struct {
	files      []string // absolute paths
	user       string
	entrypoint []string
	labels     []string // keys
}

func readDockerfile(t *testing.T, root string) dockerfileImage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines, then read the last stage only.
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	stages := regexp.MustCompile(`(?m)^FROM `).Split(text, -1)
	final := stages[len(stages)-1]
	var d dockerfileImage
	sc := bufio.NewScanner(strings.NewReader(final))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "COPY":
			srcs, dst := f[1:len(f)-1], f[len(f)-1]
			if strings.HasPrefix(srcs[0], "--from=") {
				for _, s := range srcs[1:] {
					d.files = append(d.files, filepath.Join(dst, filepath.Base(s)))
				}
				continue
			}
			// A folder of the context: its files.
			entries, err := os.ReadDir(filepath.Join(root, srcs[0]))
			if err != nil {
				t.Fatalf("COPY %s: %v", srcs[0], err)
			}
			for _, e := range entries {
				d.files = append(d.files, filepath.Join(dst, e.Name()))
			}
		case "USER":
			d.user = f[1]
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.Join(f[1:], " ")), &d.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT: %v", err)
			}
		case "LABEL":
			for _, kv := range regexp.MustCompile(`([a-z0-9.]+)=`).FindAllStringSubmatch(strings.Join(f[1:], " "), -1) {
				d.labels = append(d.labels, kv[1])
			}
		}
	}
	slices.Sort(d.files)
	slices.Sort(d.labels)
	return d
}

// TestImageMatchesDockerfile builds the image with no Docker engine (make image:
// hack/build-image.sh) and compares it with the Dockerfile: the same files at the same
// paths (besides the base layer that stands in for distroless/static), the same user,
// entrypoint and label keys; the binaries in it are static and report the version.
func TestImageMatchesDockerfile(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := readDockerfile(t, root)
	if len(want.files) < 5 || want.user == "" || len(want.entrypoint) == 0 || len(want.labels) < 5 {
		t.Fatalf("the Dockerfile reads as %+v: the parser no longer matches it", want)
	}
	out := filepath.Join(t.TempDir(), "image.oci.tar")
	cmd := exec.Command("bash", "hack/build-image.sh", out, "linux/amd64")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VERSION=v9.9.9-image")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build-image.sh: %v\n%s", err, b)
	}
	blobs := readLayout(t, out)
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
			Platform    *struct{ OS, Architecture string }
		}
	}
	unmarshal(t, blobs["index.json"], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "ghcr.io/ai-dynamo/global-discovery-mcs:v9.9.9-image" {
		t.Fatalf("index.json: %s", blobs["index.json"])
	}
	unmarshal(t, blobs[index.Manifests[0].Digest], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].Platform == nil || index.Manifests[0].Platform.Architecture != "amd64" {
		t.Fatalf("image index: want one linux/amd64 manifest, got %+v", index.Manifests)
	}
	var manifest struct {
		MediaType string
		Config    struct{ Digest string }
		Layers    []struct{ Digest, MediaType string }
	}
	unmarshal(t, blobs[index.Manifests[0].Digest], &manifest)
	var config struct {
		OS, Architecture string
		Config           struct {
			User       string
			Entrypoint []string
			Labels     map[string]string
		}
	}
	unmarshal(t, blobs[manifest.Config.Digest], &config)
	if config.Config.User != want.user || !slices.Equal(config.Config.Entrypoint, want.entrypoint) {
		t.Errorf("image user %q entrypoint %v; the Dockerfile says %q %v", config.Config.User, config.Config.Entrypoint, want.user, want.entrypoint)
	}
	var labels []string
	for k := range config.Config.Labels {
		labels = append(labels, k)
	}
	slices.Sort(labels)
	if !slices.Equal(labels, want.labels) || config.Config.Labels["org.opencontainers.image.version"] != "v9.9.9-image" {
		t.Errorf("image labels %v; the Dockerfile's %v", config.Config.Labels, want.labels)
	}

	// The files: the Dockerfile's, plus the base layer (/etc, /tmp, /home).
	dir := t.TempDir()
	var files []string
	homeOwned := false
	for _, l := range manifest.Layers {
		if l.MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
			t.Errorf("layer media type %s", l.MediaType)
		}
		zr, err := gzip.NewReader(strings.NewReader(string(blobs[l.Digest])))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := "/" + strings.TrimSuffix(h.Name, "/")
			if name == "/home/nonroot" {
				// distroless gives the user its home: a program looking there for a file
				// (client-go's ~/.kube/config) finds none instead of "permission denied".
				homeOwned = h.Typeflag == tar.TypeDir && h.Uid == 65532 && h.Gid == 65532
			}
			if h.Typeflag != tar.TypeReg || strings.HasPrefix(name, "/etc/") {
				continue
			}
			files = append(files, name)
			if filepath.Dir(name) == "/" {
				b, _ := io.ReadAll(tr)
				if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), b, 0o755); err != nil {
					t.Fatal(err)
				}
				if h.Mode&0o111 == 0 {
					t.Errorf("%s is not executable in the image (mode %o)", name, h.Mode)
				}
			}
		}
	}
	if !homeOwned {
		t.Errorf("/home/nonroot is not a folder owned by the image's user 65532:65532")
	}
	slices.Sort(files)
	if !slices.Equal(files, want.files) {
		t.Errorf("image files %v\nDockerfile files %v", files, want.files)
	}
	for _, b := range binaries {
		v, err := exec.Command(filepath.Join(dir, b), "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(v), "v9.9.9-image") {
			t.Errorf("%s from the image --version: %v %s", b, err, v)
		}
	}
}

// readLayout returns index.json and every blob of an OCI layout tarball, by digest.
func readLayout(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case h.Name == "index.json":
			out["index.json"] = b
		case strings.HasPrefix(h.Name, "blobs/sha256/"):
			out["sha256:"+strings.TrimPrefix(h.Name, "blobs/sha256/")] = b
		}
	}
}

func unmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}
