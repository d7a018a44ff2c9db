package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// writeModule writes m at version into the proxy and returns its zip's hash.
func writeModule(root, out string, m *mod, version string, gomod, gosum []byte) (string, error) {
	escaped, err := module.EscapePath(m.path)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	files := make([]modzip.File, 0, len(m.files))
	for _, p := range m.files {
		f := file{path: p, disk: filepath.Join(root, m.dir, filepath.FromSlash(p))}
		switch p {
		case "go.mod":
			f.data = gomod
		case "go.sum":
			f.data = gosum
		}
		if p == "go.sum" && gosum == nil {
			continue
		}
		files = append(files, f)
	}
	if gosum != nil && !slices.Contains(m.files, "go.sum") {
		files = append(files, file{path: "go.sum", data: gosum})
	}
	// The Go command gives a module in a subfolder the repository's LICENSE when the
	// folder has none (golang.org/x/mod/zip.CreateFromVCS); the checksums must match its.
	if !slices.Contains(m.files, "LICENSE") {
		if _, err := os.Stat(filepath.Join(root, "LICENSE")); err == nil {
			files = append(files, file{path: "LICENSE", disk: filepath.Join(root, "LICENSE")})
		}
	}
	zipPath := filepath.Join(dir, version+".zip")
	zf, err := os.Create(zipPath)
	if err != nil {
		return "", err
	}
	if err := modzip.Create(zf, module.Version{Path: m.path, Version: version}, files); err != nil {
		_ = zf.Close()
		return "", err
	}
	if err := zf.Close(); err != nil {
		return "", err
	}
	info, err := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".info"), info, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".mod"), gomod, 0o644); err != nil {
		return "", err
	}
	if err := addToList(filepath.Join(dir, "list"), version); err != nil {
		return "", err
	}
	return dirhash.HashZip(zipPath, dirhash.Hash1)
}

func addToList(listPath, version string) error {
	data, err := os.ReadFile(listPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(data))
	if slices.Contains(versions, version) {
		return nil
	}
	versions = append(versions, version)
	semver.Sort(versions)
	return os.WriteFile(listPath, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

// goModHash is the "/go.mod" checksum go.sum holds: dirhash of the single file "go.mod".
func goModHash(gomod []byte) (string, error) {
	return dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gomod)), nil
	})
}

func writeTree(root, dst string, m *mod, gomod, gosum []byte) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	for _, p := range m.files {
		if isNested(p, m.files) {
			continue
		}
		target := filepath.Join(dst, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		var data []byte
		var err error
		switch p {
		case "go.mod":
			data = gomod
		case "go.sum":
			data = gosum
		default:
			data, err = os.ReadFile(filepath.Join(root, m.dir, filepath.FromSlash(p)))
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			return err
		}
	}
	if gosum != nil && !slices.Contains(m.files, "go.sum") {
		return os.WriteFile(filepath.Join(dst, "go.sum"), gosum, 0o644)
	}
	return nil
}

// isNested tells whether p belongs to a module nested in a subfolder.
func isNested(p string, files []string) bool {
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if slices.Contains(files, dir+"/go.mod") {
			return true
		}
	}
	return false
}

// file is one file of a module zip: from disk, or the rewritten go.mod and go.sum.
type file struct {
	path string
	disk string
	data []byte
}

func (f file) Path() string { return f.path }

func (f file) Lstat() (fs.FileInfo, error) {
	if f.data != nil {
		return memInfo{name: path.Base(f.path), size: int64(len(f.data))}, nil
	}
	return os.Lstat(f.disk)
}

func (f file) Open() (io.ReadCloser, error) {
	if f.data != nil {
		return io.NopCloser(bytes.NewReader(f.data)), nil
	}
	return os.Open(f.disk)
}

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
