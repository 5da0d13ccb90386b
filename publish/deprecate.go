package publish

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"

	"github.com/chartpin/chartpin/chartbump"
	"github.com/chartpin/chartpin/deprecation"
	"github.com/chartpin/chartpin/gitops"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/resolver"
)

// Actions of a deprecation change.
const (
	Deprecated   Action = "deprecated"
	Undeprecated Action = "undeprecated"
)

// DeprecateResult says where a version's deprecation was set or withdrawn.
type DeprecateResult struct {
	Name       string             `json:"name"`
	Version    string             `json:"version"`
	Deprecated bool               `json:"deprecated"`
	Index      *IndexResult       `json:"index,omitempty"`
	OCI        *DeprecationMarker `json:"oci,omitempty"`
}

// DeprecationMarker is what happened at the OCI registry.
type DeprecationMarker struct {
	Ref    string `json:"ref"`
	Action Action `json:"action"`
	// ManifestDigest is the published chart manifest, unchanged.
	ManifestDigest string `json:"manifest_digest"`
	// Marker is the digest of the artifact that refers to it ("" when unchanged).
	Marker string `json:"marker,omitempty"`
}

// Deprecate marks a published version of the chart in chartDir deprecated
// (or, with deprecated false, withdraws that) at every target in opts: the
// index entry gains or loses deprecated: true, and in OCI a marker artifact
// refers to the chart manifest. Tarballs, other entries, tags and manifests
// are never changed. Upgrades never take a deprecated version and move
// releases running one away from it. Setting what is already set is a no-op.
func Deprecate(ctx context.Context, chartDir, version string, deprecated bool, opts Options) (*DeprecateResult, error) {
	if err := defaults(&opts); err != nil {
		return nil, err
	}
	md, err := loader.LoadDir(chartDir)
	if err != nil {
		return nil, failure.Input(fmt.Errorf("loading chart %s: %w; the chart's name says which published chart to mark", chartDir, err))
	}
	v, err := chartbump.ParseVersion(version)
	if err != nil {
		return nil, failure.Input(fmt.Errorf("version %q is not a semantic version: %w", version, err))
	}
	res := &DeprecateResult{Name: md.Metadata.Name, Version: version, Deprecated: deprecated}
	if opts.IndexDir != "" || opts.PagesBranch != "" {
		for attempt := 1; ; attempt++ {
			res.Index, err = deprecateIndex(ctx, res, v.Prerelease() != "", opts)
			if opts.PagesBranch == "" || !errors.Is(err, gitops.ErrMoved) || attempt == pagesAttempts {
				break
			}
		}
		if err != nil {
			return res, err
		}
	}
	if opts.OCI != "" {
		if res.OCI, err = deprecateOCI(ctx, res, opts); err != nil {
			return res, err
		}
	}
	return res, nil
}

// deprecateIndex sets or drops the entry's deprecated key. The index is
// edited as generic YAML, so every other field and entry is written back as
// it was read; the result is checked like any publish (every tarball still
// matches its digest) before it is written.
func deprecateIndex(ctx context.Context, res *DeprecateResult, prerelease bool, o Options) (*IndexResult, error) {
	stableDir := o.IndexDir
	if o.PagesBranch != "" {
		stableDir = "."
	}
	dir, roots := stableDir, []urlRoot{{o.BaseURL, stableDir}}
	if prerelease {
		if o.PrereleaseIndex == "" {
			return nil, failure.Input(failure.Optionf("%s %s is a prerelease, which lives in the prerelease index: pass {{PrereleaseIndex}}", res.Name, res.Version))
		}
		dir, roots = o.PrereleaseIndex, []urlRoot{{o.PrereleaseBaseURL, o.PrereleaseIndex}, {o.BaseURL, stableDir}}
	}
	st, gs, err := openStore(ctx, o)
	if err != nil {
		return nil, err
	}
	out := &IndexResult{Location: st.where(dir)}
	idxPath := st.join(dir, indexName)
	data, err := st.read(idxPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, failure.Input(fmt.Errorf("%s has no %s: %s %s was never published there", out.Location, indexName, res.Name, res.Version))
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", idxPath, err)
	}
	if _, err := checkIndexData(st, dir, data, !prerelease, roots); err != nil {
		return nil, fmt.Errorf("refusing to mark %s %s: %w", res.Name, res.Version, err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("reading %s: %w", idxPath, err)
	}
	entries, _ := doc["entries"].(map[string]any)
	list, _ := entries[res.Name].([]any)
	var entry map[string]any
	for _, e := range list {
		if m, ok := e.(map[string]any); ok && m["version"] == res.Version {
			entry = m
		}
	}
	if entry == nil {
		return nil, failure.Input(fmt.Errorf("%s %s is not in %s/%s: only a published version can be deprecated; check the version (helm search repo --versions)",
			res.Name, res.Version, out.Location, indexName))
	}
	out.Entries = countRaw(entries)
	if was, _ := entry["deprecated"].(bool); was == res.Deprecated {
		out.Action = Unchanged
		return out, nil
	}
	if res.Deprecated {
		entry["deprecated"] = true
		out.Action = Deprecated
	} else {
		delete(entry, "deprecated")
		out.Action = Undeprecated
	}
	doc["generated"] = o.Now().UTC().Format(time.RFC3339Nano)
	edited, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding index: %w", err)
	}
	if _, err := checkIndexData(st, dir, edited, !prerelease, roots); err != nil {
		return nil, fmt.Errorf("refusing to mark %s %s, the index was not written: %w", res.Name, res.Version, err)
	}
	if err := st.write(idxPath, edited); err != nil {
		return nil, err
	}
	if gs == nil {
		return out, nil
	}
	c, err := gs.push(ctx, o.PagesBranch, fmt.Sprintf("%s %s %s", out.Action, res.Name, res.Version))
	if err != nil {
		return out, err
	}
	out.Commit = c.Hash.String()
	return out, nil
}

func countRaw(entries map[string]any) int {
	n := 0
	for _, l := range entries {
		if l, ok := l.([]any); ok {
			n += len(l)
		}
	}
	return n
}

// deprecateOCI pushes a marker referring to the published chart manifest,
// unless the newest marker already says the same.
func deprecateOCI(ctx context.Context, res *DeprecateResult, o Options) (*DeprecationMarker, error) {
	ref := OCIRef(o.OCI, res.Name, res.Version)
	host, _, _ := strings.Cut(ref, "/")
	out := &DeprecationMarker{Ref: "oci://" + ref}
	var nopts []name.Option
	if slices.Contains(o.PlainHTTP, host) {
		nopts = append(nopts, name.Insecure)
	}
	tag, err := name.NewTag(strings.ReplaceAll(ref, "+", "_"), nopts...)
	if err != nil {
		return nil, failure.Input(fmt.Errorf("%s: %w", out.Ref, err))
	}
	kc, err := o.keychain()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	pusher, err := remote.NewPusher(remote.WithAuthFromKeychain(kc), remote.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	ro := []remote.Option{remote.WithAuthFromKeychain(kc), remote.WithContext(ctx), remote.Reuse(pusher)}
	desc, err := remote.Head(tag, ro...)
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return nil, failure.Input(failure.Optionf("%s is not published: only a published version can be deprecated; check the version and {{OCI}}", out.Ref))
	}
	if err != nil {
		return nil, failure.Optionf("looking up %s: %w; "+registryHint(err), out.Ref, err)
	}
	out.ManifestDigest = desc.Digest.String()
	subject := tag.Context().Digest(out.ManifestDigest)
	st, err := deprecation.Read(ctx, subject, ro...)
	if err != nil {
		return nil, failure.Optionf("%s: %w; "+registryHint(err), out.Ref, err)
	}
	if st.Deprecated == res.Deprecated {
		out.Action = Unchanged
		return out, nil
	}
	// The newest marker wins: never stamp one at or before the marker it overrides.
	at := o.Now().UTC()
	if !at.After(st.Since) {
		at = st.Since.Add(time.Millisecond)
	}
	marker, err := deprecation.Mark(ctx, pusher, subject, *desc, res.Deprecated, at)
	if err != nil {
		return nil, failure.Optionf("%w; "+registryHint(err), err)
	}
	out.Marker = marker.String()
	// Read back what upgrades will read, and check the chart's tag stayed.
	if st, err = deprecation.Read(ctx, subject, ro...); err != nil || st.Deprecated != res.Deprecated {
		return out, fmt.Errorf("%w: after marking %s, its referrers read back deprecated=%v (%v); re-run", failure.ErrFindings, out.Ref, st.Deprecated, err)
	}
	if now, err := remote.Head(tag, ro...); err != nil || now.Digest != desc.Digest {
		return out, fmt.Errorf("%w: %s no longer points at %s after marking it (%v)", failure.ErrFindings, out.Ref, out.ManifestDigest, err)
	}
	out.Action = Deprecated
	if !res.Deprecated {
		out.Action = Undeprecated
	}
	return out, nil
}

// keychain is where registry credentials come from: RegistryUser, else the
// RegistryConfig file, else the Docker config keychain.
func (o Options) keychain() (authn.Keychain, error) {
	switch {
	case o.RegistryUser != "":
		return resolver.StaticKeychain(o.RegistryUser, o.RegistryPassword), nil
	case o.RegistryConfig != "":
		f, err := os.Open(o.RegistryConfig)
		if errors.Is(err, fs.ErrNotExist) {
			return authn.NewMultiKeychain(), nil // no credentials, as Helm reads a missing file
		}
		if err != nil {
			return nil, fmt.Errorf("reading registry credentials: %w", err)
		}
		defer f.Close()
		cf, err := config.LoadFromReader(f)
		if err != nil {
			return nil, fmt.Errorf("reading registry credentials %s: %w", o.RegistryConfig, err)
		}
		return fileKeychain{cf}, nil
	}
	return authn.DefaultKeychain, nil
}

// fileKeychain answers from one docker config.json.
type fileKeychain struct{ cf *configfile.ConfigFile }

func (k fileKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	a, err := k.cf.GetAuthConfig(r.RegistryStr())
	if err != nil {
		return nil, err
	}
	if a.Username == "" && a.Password == "" && a.Auth == "" && a.IdentityToken == "" && a.RegistryToken == "" {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{Username: a.Username, Password: a.Password, Auth: a.Auth, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}), nil
}
