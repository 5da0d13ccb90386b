// Package demo runs chartpin's release-time job end to end against a
// registry embedded in the process, so `make demo` needs no network, no
// Docker and no credentials: the same resolver, discovery, pin and bump code
// paths as a real release, on a temporary copy of the example chart.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/discover"
	"github.com/chartpin/chartpin/internal/sample"
	"github.com/chartpin/chartpin/pin"
	"github.com/chartpin/chartpin/resolver"
)

// Platforms every demo image is built for.
var Platforms = []string{"linux/amd64", "linux/arm64"}

// Options configures a demo run.
type Options struct {
	// Charts holds the repository's charts/ tree (example and chartpin-lib).
	Charts fs.FS
	// Config is the chartpin.yaml that configures charts/example.
	Config []byte
	// Dir is where the chart copy goes ("" = a temporary directory, removed after).
	Dir string
}

// Run starts the embedded registry, fills it with a multi-arch index for
// every image the example chart declares (and one single-arch image), then
// resolves and pins, printing each step to w.
func Run(ctx context.Context, w io.Writer, opts Options) error {
	dir := opts.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "chartpin-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if err := copyFS(dir, opts.Charts, opts.Config); err != nil {
		return fmt.Errorf("copying the example chart: %w", err)
	}
	cfgPath := filepath.Join(dir, "chartpin.yaml")

	host, stop, err := Serve()
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(w, "== embedded registry on %s (docker.io and ghcr.io are mirrored to it)\n", host)

	refs, err := chartRefs(cfgPath)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if _, err := PushIndex(ctx, mirrored(ref, host), Platforms...); err != nil {
			return err
		}
	}
	single := host + "/demo/single-arch:1.0"
	if _, err := PushImage(ctx, single); err != nil {
		return err
	}

	newResolver := func() (*resolver.Remote, error) {
		return resolver.New(resolver.Options{Mirrors: map[string]string{"docker.io": host, "ghcr.io": host}, InsecureRegistries: []string{host}})
	}
	r, err := newResolver()
	if err != nil {
		return err
	}

	imgs, err := showResolve(ctx, w, r, append(refs, single))
	if err != nil {
		return err
	}
	if err := pinTwice(ctx, w, dir, cfgPath, r, newResolver, len(refs)+1); err != nil {
		return err
	}
	return signedRelease(ctx, w, dir, cfgPath, host, imgs, newResolver)
}

// showResolve resolves refs (the chart's, then a single-arch one) and
// prints what each names, and the platform check of the last.
func showResolve(ctx context.Context, w io.Writer, r *resolver.Remote, refs []string) ([]resolver.Image, error) {
	fmt.Fprintf(w, "\n== chartpin resolve (%d images the chart declares, plus a single-arch one)\n", len(refs)-1)
	imgs, err := resolver.ResolveEach(ctx, r, refs, nil)
	if err != nil {
		return nil, err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REF\tFROM\tDIGEST\tPLATFORMS")
	for _, img := range imgs {
		plats := strings.Join(img.Platforms, ",")
		if plats == "" {
			plats = "(single-arch)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", img.Ref, hostOf(img.Source), img.Digest, plats)
	}
	tw.Flush()
	last := imgs[len(imgs)-1]
	fmt.Fprintf(w, "platform check on %s: %v\n", last.Ref, resolver.RequirePlatforms(last.Ref, last.Platforms, Platforms))
	return imgs, nil
}

// pinTwice pins the copied chart through r and then again through a fresh
// resolver, which must find nothing to change; unique is how many refs r
// resolved before.
func pinTwice(ctx context.Context, w io.Writer, dir, cfgPath string, r *resolver.Remote, newResolver func() (*resolver.Remote, error), unique int) error {
	fmt.Fprintf(w, "\n== chartpin pin (chart copied to %s)\n", dir)
	res, err := pin.Plan(ctx, pin.Options{ConfigPath: cfgPath, Resolver: r})
	if err != nil {
		return err
	}
	fmt.Fprint(w, res.Diff())
	if err := res.Apply(); err != nil {
		return err
	}
	for _, c := range res.Charts {
		fmt.Fprintf(w, "chart %s: version %s -> %s, appVersion %s -> %s\n", c.Name, c.OldVersion, c.NewVersion, c.OldAppVersion, c.NewAppVersion)
	}
	s := r.Stats()
	fmt.Fprintf(w, "registry requests: %d HEAD, %d GET, %d token, %d ping (%d unique refs)\n", s.HEAD, s.GET, s.Token, s.Ping, unique)

	fmt.Fprintf(w, "\n== chartpin pin again (idempotent: nothing moved, no bump)\n")
	r2, err := newResolver()
	if err != nil {
		return err
	}
	again, err := pin.Plan(ctx, pin.Options{ConfigPath: cfgPath, Resolver: r2})
	if err != nil {
		return err
	}
	if again.Changed() {
		return errors.New("second run wanted to change files: the pin is not idempotent")
	}
	fmt.Fprintln(w, "no changes")
	return nil
}

// chartRefs lists the unique floats the configured charts pin from.
func chartRefs(cfgPath string) ([]string, error) {
	f, err := config.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var refs []string
	for i := range f.Charts {
		pins, err := discover.Chart(f.Charts[i].Dir, &f.Charts[i])
		if err != nil {
			return nil, err
		}
		for _, p := range pins {
			if p.Problem != "" || p.Repository == "" || p.Tag == "" || seen[p.Ref()] {
				continue
			}
			seen[p.Ref()] = true
			refs = append(refs, p.Ref())
		}
	}
	sort.Strings(refs)
	return refs, nil
}

// Serve starts an in-process OCI registry on a loopback port.
func Serve() (host string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("starting the embedded registry: %w", err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go srv.Serve(ln)
	return ln.Addr().String(), func() { srv.Close() }, nil
}

// PushIndex pushes a multi-arch index to ref and returns its digest. The
// images' content follows from the repository and tag, not the registry's
// port, so the demo prints the same digests on every run.
func PushIndex(ctx context.Context, ref string, platforms ...string) (string, error) {
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	return pushIndex(ctx, tag, tag.RepositoryStr()+":"+tag.TagStr(), platforms)
}

// pushIndex pushes a multi-arch index whose content follows from seed.
func pushIndex(ctx context.Context, tag name.Tag, seed string, platforms []string) (string, error) {
	idx, err := sample.FixedIndex(seed, types.OCIImageIndex, platforms...)
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", tag, err)
	}
	d, err := idx.Digest()
	return d.String(), err
}

// PushImage pushes one single-arch image to ref and returns its digest;
// like PushIndex's, its content follows from the repository and tag.
func PushImage(ctx context.Context, ref string) (string, error) {
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	img, err := sample.FixedImage(tag.RepositoryStr()+":"+tag.TagStr(), types.DockerManifestSchema2)
	if err != nil {
		return "", err
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := img.Digest()
	return d.String(), err
}

// mirrored rewrites a normalized ref's registry to host.
func mirrored(ref, host string) string {
	_, rest, _ := strings.Cut(ref, "/")
	return host + "/" + rest
}

func hostOf(ref string) string {
	h, _, _ := strings.Cut(ref, "/")
	return h
}

// copyFS writes the charts tree and chartpin.yaml under dir, laid out as in
// the repository (charts/example, charts/chartpin-lib, chartpin.yaml).
func copyFS(dir string, charts fs.FS, cfg []byte) error {
	err := fs.WalkDir(charts, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, "charts", filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := fs.ReadFile(charts, p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "chartpin.yaml"), cfg, 0o644)
}
