package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/registry"
	"oras.land/oras-go/v2/errdef"

	"github.com/chartpin/chartpin/internal/failure"
)

// ctxTransport binds every request to ctx: Helm's registry client uses
// context.Background() internally, so this is how a cancelled command stops it.
type ctxTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

// RoundTrip sends r under the command's context.
func (t ctxTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.base.RoundTrip(r.WithContext(t.ctx))
}

// OCIRef is where an oci:// target puts a chart: HOST/PATH/NAME:VERSION, in
// Helm's form (Helm stores a "+" in a version as "_" in the tag itself).
func OCIRef(target, name, version string) string {
	base := strings.TrimSuffix(strings.TrimPrefix(target, "oci://"), "/")
	return base + "/" + name + ":" + version
}

// NewRegistryClient returns Helm's registry client for host with chartpin's
// transport settings.
func NewRegistryClient(ctx context.Context, host string, o Options) (*registry.Client, error) {
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	hc := &http.Client{Timeout: o.Timeout, Transport: ctxTransport{ctx, http.DefaultTransport}}
	opts := []registry.ClientOption{registry.ClientOptWriter(io.Discard), registry.ClientOptHTTPClient(hc)}
	if slices.Contains(o.PlainHTTP, host) {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	if o.RegistryConfig != "" {
		opts = append(opts, registry.ClientOptCredentialsFile(o.RegistryConfig))
	}
	if o.RegistryUser != "" {
		opts = append(opts, registry.ClientOptBasicAuth(o.RegistryUser, o.RegistryPassword))
	}
	c, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("setting up the registry client for %s: %w", host, err)
	}
	return c, nil
}

func publishOCI(ctx context.Context, res *Result, o Options) (*OCIResult, error) {
	ref := OCIRef(o.OCI, res.Name, res.Version)
	host, _, _ := strings.Cut(ref, "/")
	out := &OCIResult{Ref: "oci://" + ref}
	c, err := NewRegistryClient(ctx, host, o)
	if err != nil {
		return nil, err
	}
	// Resolve, unlike Push and Pull, takes the registry's tag form.
	desc, err := c.Resolve(strings.ReplaceAll(ref, "+", "_"))
	switch {
	case err == nil:
		// Present: identical chart bytes are a no-op, anything else is refused.
		pulled, err := c.Pull(ref, registry.PullOptWithChart(true))
		if err != nil {
			return nil, failure.Optionf("pulling the published %s to compare: %w; "+registryHint(err), out.Ref, err)
		}
		if !bytes.Equal(pulled.Chart.Data, res.Package) {
			return nil, fmt.Errorf("%w: %s exists with chart digest %s, this package is %s; publish never overwrites a version, so fleets never get two charts under one name: bump the chart version (chartpin bump) and publish again",
				ErrPublished, out.Ref, short(pulled.Chart.Digest), short(res.Digest))
		}
		out.Action, out.ManifestDigest = Unchanged, desc.Digest.String()
		return out, nil
	case errors.Is(err, errdef.ErrNotFound):
	default:
		return nil, failure.Optionf("looking up %s: %w; "+registryHint(err), out.Ref, err)
	}
	opts := []registry.PushOption{registry.PushOptStrictMode(true), registry.PushOptCreationTime(o.Now().UTC().Format(time.RFC3339))}
	if res.Provenance != nil {
		opts = append(opts, registry.PushOptProvData(res.Provenance))
	}
	pushed, err := c.Push(res.Package, ref, opts...)
	if err != nil {
		return nil, failure.Optionf("pushing %s: %w; "+registryHint(err), out.Ref, err)
	}
	if got := strings.TrimPrefix(pushed.Chart.Digest, "sha256:"); got != res.Digest {
		return nil, fmt.Errorf("pushing %s: the registry stored chart layer %s, we sent %s", out.Ref, short(got), short(res.Digest))
	}
	o.Logger.Debug("pushed", "ref", out.Ref, "manifest", pushed.Manifest.Digest)
	out.Action, out.ManifestDigest = Pushed, pushed.Manifest.Digest
	return out, nil
}

func registryHint(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "401") || strings.Contains(s, "unauthorized") || strings.Contains(s, "403") || strings.Contains(s, "credential not found"):
		return "log in first (docker login, or DOCKER_CONFIG pointing at a config.json with credentials for the registry)"
	case strings.Contains(s, "http: server gave HTTP response to HTTPS client"):
		return "the registry speaks plain HTTP: pass {{PlainHTTP}} HOST"
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(s, "Client.Timeout"):
		return "the registry did not answer in time; raise {{Timeout}} or re-run"
	}
	return "check the registry address and network, then re-run"
}
