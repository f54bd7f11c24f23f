package main

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// imageLayout is the OCI layout `make image` wrote; make test sets it.
func imageLayout(t *testing.T) v1.ImageIndex {
	t.Helper()
	dir := os.Getenv("OTELCOL_COST_IMAGE")
	if dir == "" {
		t.Skip("OTELCOL_COST_IMAGE not set: run through `make test`, which builds the image first")
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// walk calls f with every entry of an image's layers, in order, until f
// returns true.
func walk(t *testing.T, img v1.Image, f func(h *tar.Header, r io.Reader) (stop bool)) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if f(h, tr) {
				rc.Close()
				return
			}
		}
		rc.Close()
	}
}

// files lists every file and folder of an image by path.
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	walk(t, img, func(h *tar.Header, _ io.Reader) bool {
		out["/"+strings.TrimSuffix(h.Name, "/")] = h
		return false
	})
	return out
}

// extract copies one file of an image out to dir.
func extract(t *testing.T, img v1.Image, path, dir string) string {
	t.Helper()
	dst := ""
	walk(t, img, func(h *tar.Header, r io.Reader) bool {
		if "/"+h.Name != path {
			return false
		}
		dst = filepath.Join(dir, filepath.Base(path))
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := io.Copy(f, r); err != nil {
			t.Fatal(err)
		}
		return true
	})
	if dst == "" {
		t.Fatalf("%s not in the image", path)
	}
	return dst
}

func TestImageLayout(t *testing.T) {
	idx := imageLayout(t)
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	platforms := map[string]v1.Hash{}
	for _, d := range manifest.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		platforms[d.Platform.OS+"/"+d.Platform.Architecture] = d.Digest
	}
	for _, want := range []string{"linux/amd64", "linux/arm64"} {
		if _, ok := platforms[want]; !ok {
			t.Fatalf("platform %s missing; have %v", want, platforms)
		}
	}
	machines := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}
	for platform, digest := range platforms {
		t.Run(platform, func(t *testing.T) {
			img, err := idx.Image(digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS+"/"+cf.Architecture != platform {
				t.Errorf("config says %s/%s", cf.OS, cf.Architecture)
			}
			c := cf.Config
			if c.User != "10001:10001" {
				t.Errorf("user %q, want 10001:10001", c.User)
			}
			if strings.Join(c.Entrypoint, " ") != binaryPath || strings.Join(c.Cmd, " ") != "--config "+configPath {
				t.Errorf("entrypoint %v cmd %v", c.Entrypoint, c.Cmd)
			}
			for _, label := range []string{"org.opencontainers.image.source", "org.opencontainers.image.version", "org.opencontainers.image.revision"} {
				if c.Labels[label] == "" {
					t.Errorf("label %s missing", label)
				}
			}
			fs := files(t, img)
			for _, p := range []string{binaryPath, configPath, certsPath, "/etc/passwd"} {
				if fs[p] == nil || fs[p].Size == 0 {
					t.Errorf("%s missing or empty", p)
				}
			}
			if d := fs[dataDir]; d == nil || d.Uid != uid {
				t.Errorf("%s must exist and belong to %d", dataDir, uid)
			}
			if fs[binaryPath] != nil && fs[binaryPath].Mode&0o111 == 0 {
				t.Errorf("%s not executable", binaryPath)
			}
			dir := t.TempDir()
			bin := extract(t, img, binaryPath, dir)
			ef, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			if ef.Machine != machines[platform] {
				t.Errorf("binary is for %v, want %v", ef.Machine, machines[platform])
			}
			ef.Close()
			if platform != "linux/amd64" {
				return
			}
			// The amd64 binary runs here: it lists our components and
			// validates the baked-in config with the image's environment.
			out, err := exec.Command(bin, "components").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "budget_tail_sampling") || !strings.Contains(string(out), "span_cost") {
				t.Fatalf("components: %v\n%s", err, out)
			}
			conf := extract(t, img, configPath, dir)
			cmd := exec.Command(bin, "validate", "--config", conf)
			cmd.Env = append(os.Environ(), c.Env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("validate the baked-in config: %v\n%s", err, out)
			}
			// And every config the repository ships.
			shipped, _ := filepath.Glob(filepath.Join("..", "..", "configs", "*.yaml"))
			if len(shipped) == 0 {
				t.Fatal("no configs/*.yaml found")
			}
			for _, f := range shipped {
				args := []string{"validate", "--config", f}
				// Overlays validate over the config they complete.
				if base, ok := map[string]string{"backend.yaml": "tail.yaml", "gateway-loadbalancing.yaml": "gateway.yaml"}[filepath.Base(f)]; ok {
					args = []string{"validate", "--config", filepath.Join("..", "..", "configs", base), "--config", f}
				}
				cmd := exec.Command(bin, args...)
				cmd.Env = append(os.Environ(), "OTLP_BACKEND_ENDPOINT=127.0.0.1:4317")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("validate %s with the image's binary: %v\n%s", filepath.Base(f), err, out)
				}
			}
		})
	}
}
