// Command image assembles the project's image as an OCI image layout tarball from the
// static binaries hack/build-binaries.sh builds, with no Docker engine: the files, user,
// entrypoint and labels of the Dockerfile's final stage. The Dockerfile's base
// (distroless/static, nonroot) is replaced by one small layer with what the binaries use
// from it: /etc/passwd and /etc/group with the nonroot user 65532, /tmp, and the CA bundle.
//
//	image --out dist/image.oci.tar --tag ghcr.io/ai-dynamo/global-discovery-mcs:v1.2.3 \
//	  --platform linux/amd64=dist/bin-linux-amd64 --crds charts/global-discovery-mcs/files/crds
//
// Every file has the commit's time (--created), so one commit gives the same bytes.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// binaries are the Dockerfile's `COPY --from=build /out/...` files, in its order.
var binaries = []string{"mcs-registry", "mcs-controller", "mcs-admin", "global-discovery-service"}

const (
	user       = "65532:65532"
	entrypoint = "/mcs-registry"
)

type platforms []string

func (p *platforms) String() string     { return strings.Join(*p, ",") }
func (p *platforms) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	var (
		plats                                                          platforms
		out, tag, crds, caBundle, version, commit, created, sourceRepo string
	)
	flag.Var(&plats, "platform", "os/arch=DIR: the binaries of one platform (repeatable)")
	flag.StringVar(&out, "out", "", "the OCI image layout tarball to write")
	flag.StringVar(&tag, "tag", "", "the image reference recorded in the layout (org.opencontainers.image.ref.name)")
	flag.StringVar(&crds, "crds", "", "the folder of CRD files copied to /crds")
	flag.StringVar(&caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle copied to /etc/ssl/certs/ca-certificates.crt (DynamoDB's TLS); empty: none")
	flag.StringVar(&version, "version", "dev", "org.opencontainers.image.version")
	flag.StringVar(&commit, "commit", "unknown", "org.opencontainers.image.revision")
	flag.StringVar(&created, "created", "", "RFC 3339 time of every file and of the image (the commit's time)")
	flag.StringVar(&sourceRepo, "source", "https://github.com/ai-dynamo/global-discovery-mcs", "org.opencontainers.image.source")
	flag.Parse()
	if out == "" || tag == "" || crds == "" || len(plats) == 0 {
		fmt.Fprintln(os.Stderr, "image: --out, --tag, --crds and at least one --platform are required")
		os.Exit(2)
	}
	when := time.Unix(0, 0).UTC()
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			fmt.Fprintf(os.Stderr, "image: --created: %v\n", err)
			os.Exit(2)
		}
		when = t.UTC()
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "global-discovery-mcs",
		"org.opencontainers.image.description": "Kubernetes Multi-Cluster Services for NVIDIA Dynamo: mcs-registry, mcs-controller, mcs-admin, global-discovery-service",
		"org.opencontainers.image.source":      sourceRepo,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    commit,
		"org.opencontainers.image.created":     when.Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if err := run(out, tag, crds, caBundle, plats, when, labels); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(out, tag, crds, caBundle string, plats []string, when time.Time, labels map[string]string) error {
	base, err := baseLayer(caBundle, when)
	if err != nil {
		return err
	}
	crdLayer, err := crdsLayer(crds, when)
	if err != nil {
		return err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range plats {
		osArch, dir, ok := strings.Cut(p, "=")
		goos, arch, ok2 := strings.Cut(osArch, "/")
		if !ok || !ok2 {
			return fmt.Errorf("--platform %q: want os/arch=DIR", p)
		}
		bins, err := binariesLayer(dir, when)
		if err != nil {
			return err
		}
		img, err := image(goos, arch, when, labels, base, bins, crdLayer)
		if err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: arch}}})
	}
	dir, err := os.MkdirTemp("", "image-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write the layout: %w", err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return fmt.Errorf("write the image index: %w", err)
	}
	return tarDir(dir, out, when)
}

func image(goos, arch string, when time.Time, labels map[string]string, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layers...)
	if err != nil {
		return nil, fmt.Errorf("%s/%s layers: %w", goos, arch, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = goos, arch, v1.Time{Time: when}
	cf.Config.User = user
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Labels = labels
	cf.History = nil
	return mutate.ConfigFile(img, cf)
}

type file struct {
	name string
	mode int64
	data []byte
	dir  bool
	// owner is the uid and gid (0: root).
	owner int
}

func layer(files []file, when time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: when, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.data)), Uid: f.owner, Gid: f.owner}
		if f.dir {
			h.Typeflag, h.Size, h.Name = tar.TypeDir, 0, f.name+"/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, tarball.WithMediaType(types.OCILayer))
}

func baseLayer(caBundle string, when time.Time) (v1.Layer, error) {
	files := []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "home", mode: 0o755, dir: true},
		// The nonroot user's home is its own, as in distroless: programs that look for
		// files there (client-go's ~/.kube/config) must be able to find none.
		{name: "home/nonroot", mode: 0o700, dir: true, owner: 65532},
		{name: "tmp", mode: 0o1777, dir: true},
	}
	if caBundle != "" {
		b, err := os.ReadFile(caBundle)
		if err != nil {
			return nil, fmt.Errorf("--ca-bundle: %w", err)
		}
		files = append(files, file{name: "etc/ssl", mode: 0o755, dir: true}, file{name: "etc/ssl/certs", mode: 0o755, dir: true},
			file{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: b})
	}
	return layer(files, when)
}

func binariesLayer(dir string, when time.Time) (v1.Layer, error) {
	var files []file
	for _, b := range binaries {
		data, err := os.ReadFile(filepath.Join(dir, b))
		if err != nil {
			return nil, fmt.Errorf("binary: %w", err)
		}
		files = append(files, file{name: b, mode: 0o755, data: data})
	}
	return layer(files, when)
}

func crdsLayer(dir string, when time.Time) (v1.Layer, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--crds: %w", err)
	}
	files := []file{{name: "crds", mode: 0o755, dir: true}}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files = append(files, file{name: "crds/" + e.Name(), mode: 0o644, data: data})
	}
	return layer(files, when)
}

// tarDir writes the layout folder as one tarball, in name order, with fixed times and owners.
func tarDir(dir, out string, when time.Time) error {
	var names []string
	if err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			names = append(names, p)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range names {
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: when, Mode: 0o644, Typeflag: tar.TypeReg, Size: info.Size(), Format: tar.FormatPAX}
		if info.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, err := tw.Write(b); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
