// Command imagebuild assembles the otelcol-cost container image without a
// Docker daemon, with go-containerregistry: a multi-architecture OCI index
// (one manifest per platform), each image a scratch-style root — the static
// binary, CA certificates, a non-root user 10001, a writable data folder and
// the one-node pipeline (configs/tail.yaml) as the default config — with
// OCI labels. It writes an OCI image layout, and pushes it when asked.
//
//	imagebuild -out bin/image -version 0.1.0 -revision $(git rev-parse HEAD) \
//	  -binary linux/amd64=bin/linux-amd64/otelcol-cost \
//	  -binary linux/arm64=bin/linux-arm64/otelcol-cost \
//	  -config configs/tail.yaml [-push registry.example.com/otelcol-cost:0.1.0]
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths and identity inside the image.
const (
	binaryPath = "/otelcol-cost"
	configPath = "/etc/otelcol-cost/config.yaml"
	dataDir    = "/var/lib/otelcol-cost"
	certsPath  = "/etc/ssl/certs/ca-certificates.crt"
	uid        = 10001
)

type binaries map[string]string // "linux/amd64" → path

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binaries) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	if !ok || !strings.Contains(platform, "/") {
		return fmt.Errorf("-binary %q: want os/arch=path", v)
	}
	b[platform] = path
	return nil
}

type options struct {
	out, version, revision, source, config, certs, push string
	bins                                                binaries
	created                                             time.Time
}

func main() {
	o := options{bins: binaries{}}
	flag.StringVar(&o.out, "out", "bin/image", "OCI image layout folder to write")
	flag.StringVar(&o.version, "version", "0.1.0", "image version (OCI label)")
	flag.StringVar(&o.revision, "revision", "", "source revision (OCI label)")
	flag.StringVar(&o.source, "source", "https://github.com/otelcol-cost/otelcol-cost", "source repository (OCI label)")
	flag.StringVar(&o.config, "config", "configs/tail.yaml", "default config baked in")
	flag.StringVar(&o.certs, "certs", "/etc/ssl/certs/ca-certificates.crt", "CA certificate bundle to include")
	flag.StringVar(&o.push, "push", "", "also push the index to this reference (registry/repository:tag)")
	flag.Var(o.bins, "binary", "os/arch=path of a static binary (repeat per platform)")
	epoch := flag.Int64("created", 0, "creation time, Unix seconds (default SOURCE_DATE_EPOCH, else 0: reproducible)")
	flag.Parse()
	if *epoch == 0 {
		if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
			_, _ = fmt.Sscan(s, epoch)
		}
	}
	o.created = time.Unix(*epoch, 0).UTC()
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

func run(o options) error {
	if len(o.bins) == 0 {
		return errors.New("-binary: at least one platform is required")
	}
	idx, err := buildIndex(o)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	if _, err := layout.Write(o.out, idx); err != nil {
		return fmt.Errorf("writing %s: %w", o.out, err)
	}
	log.Printf("wrote OCI image layout %s (%d platforms)", o.out, len(o.bins))
	if o.push == "" {
		return nil
	}
	ref, err := name.ParseReference(o.push)
	if err != nil {
		return fmt.Errorf("-push: %w", err)
	}
	if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	log.Printf("pushed %s", ref)
	return nil
}

func buildIndex(o options) (v1.ImageIndex, error) {
	config, err := os.ReadFile(o.config)
	if err != nil {
		return nil, err
	}
	certs, err := os.ReadFile(o.certs)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	base, err := layerOf(baseFiles(certs))
	if err != nil {
		return nil, err
	}
	conf, err := layerOf([]file{{path: configPath, mode: 0o644, data: config}})
	if err != nil {
		return nil, err
	}
	var idx v1.ImageIndex = empty.Index
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, platform := range slices.Sorted(maps.Keys(o.bins)) {
		osName, arch, _ := strings.Cut(platform, "/")
		bin, err := os.ReadFile(o.bins[platform])
		if err != nil {
			return nil, err
		}
		binLayer, err := layerOf([]file{{path: binaryPath, mode: 0o755, data: bin}})
		if err != nil {
			return nil, err
		}
		img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, conf, binLayer)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = osName, arch
		cf.Created = v1.Time{Time: o.created}
		cf.Config = imageConfig(o)
		img, err = mutate.ConfigFile(img, cf)
		if err != nil {
			return nil, err
		}
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}},
		})
	}
	return idx, nil
}

// imageConfig starts the one-node pipeline, listening on every interface
// (the shipped config listens on localhost for a laptop), as user 10001.
func imageConfig(o options) v1.Config {
	return v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint: []string{binaryPath},
		Cmd:        []string{"--config", configPath},
		WorkingDir: "/",
		Env: []string{
			"OTLP_GRPC_ENDPOINT=0.0.0.0:4317",
			"OTLP_HTTP_ENDPOINT=0.0.0.0:4318",
			"HEALTH_CHECK_ENDPOINT=0.0.0.0:13133",
			"METRICS_HOST=0.0.0.0",
			"OTELCOL_COST_DATA_DIR=" + dataDir,
			"SSL_CERT_FILE=" + certsPath,
		},
		ExposedPorts: map[string]struct{}{"4317/tcp": {}, "4318/tcp": {}, "8888/tcp": {}, "13133/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "otelcol-cost",
			"org.opencontainers.image.source":   o.source,
			"org.opencontainers.image.version":  o.version,
			"org.opencontainers.image.revision": o.revision,
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	}
}

// file is one entry of a layer; a nil data with a trailing slash is a folder.
type file struct {
	path     string
	mode     int64
	data     []byte
	uid, gid int
}

// baseFiles is the scratch root: users, CA certificates, a writable data
// folder and /tmp.
func baseFiles(certs []byte) []file {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\notelcol:x:%d:%d:otelcol-cost:%s:/sbin/nologin\n", uid, uid, dataDir)
	group := fmt.Sprintf("root:x:0:\notelcol:x:%d:\n", uid)
	return []file{
		{path: "/etc/", mode: 0o755},
		{path: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "/etc/group", mode: 0o644, data: []byte(group)},
		{path: "/etc/ssl/", mode: 0o755},
		{path: "/etc/ssl/certs/", mode: 0o755},
		{path: certsPath, mode: 0o644, data: certs},
		{path: "/etc/otelcol-cost/", mode: 0o755},
		{path: "/var/", mode: 0o755},
		{path: "/var/lib/", mode: 0o755},
		{path: dataDir + "/", mode: 0o750, uid: uid, gid: uid},
		{path: "/tmp/", mode: 0o1777},
	}
}

// layerOf is a gzipped tar layer of files, with fixed times (reproducible).
func layerOf(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: strings.TrimPrefix(f.path, "/"), Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if strings.HasSuffix(f.path, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
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
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
