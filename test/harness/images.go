package harness

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The images every node imports. No image registry is reachable, so each is assembled
// here from binaries: the project's image by hack/build-image.sh (what `make image` writes),
// the others from the pause program, CoreDNS and Debian's static busybox.
const (
	// PauseImage is every Pod's sandbox (containerd's sandbox_image).
	PauseImage = "localhost/mcs-test/pause:1"
	// BusyboxImage has sh, wget, nslookup, nc and httpd: clients and HTTP servers for tests.
	BusyboxImage = "localhost/mcs-test/busybox:1"
	// CoreDNSImage runs /coredns; the cluster's DNS.
	CoreDNSImage = "localhost/mcs-test/coredns:1"
	// ProjectImage is the project's image, built as `make image` builds it.
	ProjectImage = "localhost/global-discovery-mcs:test"
)

// NodeImage is an image as a tarball that `ctr images import` reads.
type NodeImage struct {
	Ref, Tar string
}

var (
	imagesOnce sync.Once
	images     []NodeImage
	imagesErr  error
)

// NodeImages builds the images once per test process, into .cache/images of the repository.
func NodeImages(tb testing.TB) []NodeImage {
	tb.Helper()
	imagesOnce.Do(func() { images, imagesErr = buildNodeImages() })
	if imagesErr != nil {
		tb.Fatalf("harness: node images: %v", imagesErr)
	}
	return images
}

func buildNodeImages() ([]NodeImage, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, ".cache", "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []NodeImage
	// pause: a static Go program.
	pauseBin := filepath.Join(dir, "pause")
	build := exec.Command("go", "build", "-trimpath", "-o", pauseBin, "./cmd/pause")
	build.Dir = filepath.Join(root, "test")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build pause: %v\n%s", err, b)
	}
	pause, err := os.ReadFile(pauseBin)
	if err != nil {
		return nil, err
	}
	img := NodeImage{Ref: PauseImage, Tar: filepath.Join(dir, "pause.tar")}
	if err := writeImage(img, []imageFile{{name: "pause", mode: 0o755, data: pause}}, []string{"/pause"}, ""); err != nil {
		return nil, err
	}
	out = append(out, img)

	// busybox: Debian's busybox-static with the applets tests use.
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("busybox (Debian package busybox-static): %w", err)
	}
	files := []imageFile{{name: "bin", mode: 0o755, dir: true}, {name: "bin/busybox", mode: 0o755, data: bb}, {name: "tmp", mode: 0o1777, dir: true},
		{name: "etc", mode: 0o755, dir: true}, {name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnogroup:x:65534:\n")}}
	for _, applet := range []string{"sh", "wget", "nslookup", "nc", "httpd", "sleep", "cat", "echo", "hostname", "ls", "mkdir", "env", "ip", "ping", "true", "timeout"} {
		files = append(files, imageFile{name: "bin/" + applet, link: "busybox"})
	}
	img = NodeImage{Ref: BusyboxImage, Tar: filepath.Join(dir, "busybox.tar")}
	if err := writeImage(img, files, []string{"/bin/sh"}, ""); err != nil {
		return nil, err
	}
	out = append(out, img)

	// CoreDNS, built by `make tools` (hack/build-coredns.sh).
	corednsBin := filepath.Join(root, "bin", "k8s", "coredns")
	coredns, err := os.ReadFile(corednsBin)
	if err != nil {
		return nil, fmt.Errorf("%w; run `make tools`", err)
	}
	img = NodeImage{Ref: CoreDNSImage, Tar: filepath.Join(dir, "coredns.tar")}
	if err := writeImage(img, []imageFile{{name: "coredns", mode: 0o755, data: coredns}}, []string{"/coredns"}, ""); err != nil {
		return nil, err
	}
	out = append(out, img)

	// The project's image, exactly as `make image` builds it.
	img = NodeImage{Ref: ProjectImage, Tar: filepath.Join(dir, "project.oci.tar")}
	repo, tag, _ := strings.Cut(ProjectImage[len("localhost/"):], ":")
	cmd := exec.Command("bash", filepath.Join(root, "hack", "build-image.sh"), img.Tar)
	cmd.Env = append(os.Environ(), "IMAGE_REPOSITORY=localhost/"+repo, "VERSION="+tag)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("hack/build-image.sh: %v\n%s", err, b)
	}
	return append(out, img), nil
}

type imageFile struct {
	name string
	mode int64
	data []byte
	dir  bool
	link string
}

// writeImage writes a one-layer linux/amd64 image as a docker-archive tarball tagged ref.
func writeImage(img NodeImage, files []imageFile, entrypoint []string, user string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	when := time.Unix(0, 0)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: when, Typeflag: tar.TypeReg, Size: int64(len(f.data))}
		switch {
		case f.dir:
			h.Typeflag, h.Size, h.Name = tar.TypeDir, 0, f.name+"/"
		case f.link != "":
			h.Typeflag, h.Size, h.Linkname, h.Mode = tar.TypeSymlink, 0, f.link, 0o777
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		return err
	}
	image, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.DockerManifestSchema2), layer)
	if err != nil {
		return err
	}
	cf, err := image.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint, cf.Config.User = entrypoint, user
	cf.Config.Env = []string{"PATH=/bin"}
	if image, err = mutate.ConfigFile(image, cf); err != nil {
		return err
	}
	ref, err := name.NewTag(img.Ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(img.Tar, ref, image)
}
