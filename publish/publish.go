// Package publish packages a chart with the Helm SDK and ships it to a Helm
// repository index (a directory or a git branch such as gh-pages) and/or an
// OCI registry. It never overwrites a published version: the same
// version with identical bytes is a no-op, different bytes are refused.
// Prereleases never enter the stable index, and every index write is re-read
// and checked (docs/design.md#versions-and-publishing).
package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/chartpin/chartpin/chartbump"
	"github.com/chartpin/chartpin/gitops"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/redact"
)

// ErrPublished: the version is already published with different bytes.
var ErrPublished = errors.New("version already published with different bytes")

// ImagesAnnotation is the chart annotation listing the images the chart runs.
const ImagesAnnotation = "chartpin.io/images"

// Options says what to publish where.
type Options struct {
	// Version and AppVersion, when set, must equal Chart.yaml's.
	Version, AppVersion string

	// IndexDir is a Helm repository directory (index.yaml and tarballs).
	IndexDir string
	// PagesBranch is a branch of Repo's remote holding the repository
	// (index.yaml at its root); exclusive with IndexDir.
	PagesBranch string
	// Repo pushes PagesBranch (gitops.Open on the chart's checkout).
	Repo *gitops.Repo
	// PrereleaseIndex is where prereleases go: a directory, or a path inside
	// PagesBranch. Without it a prerelease is refused for index targets.
	PrereleaseIndex string
	// BaseURL prefixes tarball URLs in the stable index (empty: relative URLs).
	BaseURL string
	// PrereleaseBaseURL prefixes tarball URLs in the prerelease index. When
	// empty it is BaseURL plus PrereleaseIndex's path below the stable root;
	// it is required when BaseURL is set and PrereleaseIndex lies elsewhere.
	PrereleaseBaseURL string

	// OCI is an oci://host/path target; the chart lands at path/NAME:VERSION.
	OCI string
	// PlainHTTP lists registry hosts spoken to over plain HTTP (loopback tests).
	PlainHTTP []string
	// RegistryConfig is a docker-style config.json with registry credentials
	// (default: Helm's registry config, then DOCKER_CONFIG).
	RegistryConfig string
	// RegistryUser and RegistryPassword, when set, are used for every
	// registry instead (CHARTPIN_REGISTRY_AUTH in the CLI).
	RegistryUser, RegistryPassword string

	// SignKey signs the package (a .prov file) with this key from Keyring.
	SignKey, Keyring string
	// Passphrase unlocks SignKey when it is encrypted.
	Passphrase func() ([]byte, error)

	// Now is the clock for index timestamps (default time.Now).
	Now func() time.Time
	// ModTime is stamped on every file in the tarball so the same chart
	// always packages to the same bytes (default: the Unix epoch).
	ModTime time.Time
	// Timeout bounds each network step (default 2m).
	Timeout time.Duration
	Logger  *slog.Logger
}

// Action says what happened at one target.
type Action string

// Actions a target reports.
const (
	Added     Action = "added"
	Pushed    Action = "pushed"
	Unchanged Action = "unchanged" // already published with identical bytes
)

// Result describes a publish.
type Result struct {
	Name, Version, AppVersion string
	Prerelease                bool
	// Filename of the tarball and its sha256 (hex), as the index records it.
	Filename, Digest string
	// Package is the tarball; Provenance the .prov file when signed.
	Package, Provenance []byte
	// Images is the chartpin.io/images annotation value.
	Images string

	Index *IndexResult
	OCI   *OCIResult
}

// IndexResult is what happened to the Helm repository index.
type IndexResult struct {
	// Location is the directory, or branch:path for a git branch.
	Location string `json:"location"`
	Action   Action `json:"action"`
	// Entries is the number of chart versions in the index after the write.
	Entries int `json:"entries"`
	// Unverified counts entries whose tarball lives elsewhere (not checked).
	Unverified int `json:"unverified,omitempty"`
	// Commit is the gh-pages commit, when one was pushed.
	Commit string `json:"commit,omitempty"`
}

// OCIResult is what happened at the OCI registry.
type OCIResult struct {
	Ref    string `json:"ref"`
	Action Action `json:"action"`
	// ManifestDigest of the pushed (or found) manifest.
	ManifestDigest string `json:"manifest_digest"`
}

// Publish packages chartDir and ships it to every target in opts.
func Publish(ctx context.Context, chartDir string, opts Options) (*Result, error) {
	if err := defaults(&opts); err != nil {
		return nil, err
	}
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		return nil, failure.Input(fmt.Errorf("loading chart %s: %w; check Chart.yaml and templates", chartDir, err))
	}
	md := ch.Metadata
	if opts.Version != "" && opts.Version != md.Version {
		return nil, failure.Input(failure.Optionf("{{Version}} %s disagrees with %s/Chart.yaml version %s; bump the chart (chartpin bump) or drop {{Version}}: a tarball must match its source",
			opts.Version, chartDir, md.Version))
	}
	if opts.AppVersion != "" && opts.AppVersion != md.AppVersion {
		return nil, failure.Input(failure.Optionf("{{AppVersion}} %s disagrees with %s/Chart.yaml appVersion %s; bump the chart (chartpin bump) or drop {{AppVersion}}",
			opts.AppVersion, chartDir, md.AppVersion))
	}
	v, err := chartbump.ParseVersion(md.Version)
	if err != nil {
		return nil, failure.Input(fmt.Errorf("%s/Chart.yaml version %q is not a semantic version (X.Y.Z, optional v prefix): %w", chartDir, md.Version, err))
	}
	res := &Result{Name: md.Name, Version: md.Version, AppVersion: md.AppVersion, Prerelease: v.Prerelease() != ""}
	indexed := opts.IndexDir != "" || opts.PagesBranch != ""
	if res.Prerelease && indexed && opts.PrereleaseIndex == "" {
		return nil, failure.Input(failure.Optionf("%s %s is a prerelease and never enters the stable index, where every consumer would take it as a release; pass {{PrereleaseIndex}} DIR for it",
			md.Name, md.Version))
	}

	images, err := renderImages(ch)
	if err != nil {
		opts.Logger.Warn("images annotation skipped: the chart does not render with its defaults", "chart", md.Name, "err", err)
	} else {
		setAnnotation(ch, ImagesAnnotation, images)
		res.Images = images
	}
	pkg, err := packageChart(ch, opts.ModTime)
	if err != nil {
		return nil, fmt.Errorf("packaging %s: %w", chartDir, err)
	}
	res.Package, res.Filename, res.Digest = pkg, fmt.Sprintf("%s-%s.tgz", md.Name, md.Version), sha256hex(pkg)
	if opts.SignKey != "" {
		if res.Provenance, err = sign(pkg, res.Filename, opts); err != nil {
			return nil, err
		}
	}
	opts.Logger.Debug("packaged", "chart", md.Name, "version", md.Version, "digest", res.Digest, "bytes", len(pkg))

	if indexed {
		if res.Index, err = publishIndex(ctx, ch.Metadata, res, opts); err != nil {
			return res, err
		}
	}
	if opts.OCI != "" {
		if res.OCI, err = publishOCI(ctx, res, opts); err != nil {
			return res, err
		}
	}
	return res, nil
}

// Validate checks the options by themselves, before anything is packaged
// or sent: one target at least, well-formed URLs, and a prerelease index
// apart from the stable one. Errors name options by their field names.
func (o Options) Validate() error {
	switch {
	case o.IndexDir == "" && o.PagesBranch == "" && o.OCI == "":
		return failure.Input(failure.Optionf("nothing to publish to: pass {{IndexDir}} DIR, {{PagesBranch}} BRANCH and/or {{OCI}} oci://HOST/PATH"))
	case o.IndexDir != "" && o.PagesBranch != "":
		return failure.Input(failure.Optionf("{{IndexDir}} and {{PagesBranch}} are exclusive: the index lives in one place"))
	case o.PagesBranch != "" && o.Repo == nil:
		return failure.Input(failure.Optionf("{{PagesBranch}} needs a git checkout to push from"))
	case o.BaseURL != "" && !isHTTP(o.BaseURL):
		return failure.Input(failure.Optionf("{{BaseURL}} %q: want an http(s) URL", redact.URL(o.BaseURL)))
	case o.PrereleaseBaseURL != "" && !isHTTP(o.PrereleaseBaseURL):
		return failure.Input(failure.Optionf("{{PrereleaseBaseURL}} %q: want an http(s) URL", redact.URL(o.PrereleaseBaseURL)))
	case o.PrereleaseBaseURL != "" && strings.TrimRight(o.PrereleaseBaseURL, "/") == strings.TrimRight(o.BaseURL, "/"):
		return failure.Input(failure.Optionf("{{PrereleaseBaseURL}} %s is {{BaseURL}}: prerelease tarball URLs would point into the stable repository; give the URL {{PrereleaseIndex}} is served at",
			o.PrereleaseBaseURL))
	case o.PrereleaseBaseURL != "" && o.PrereleaseIndex == "":
		return failure.Input(failure.Optionf("{{PrereleaseBaseURL}} without {{PrereleaseIndex}}: say where prereleases go"))
	}
	if o.OCI != "" {
		if err := CheckOCI(o.OCI); err != nil {
			return err
		}
	}
	for _, f := range [][2]string{{"BaseURL", o.BaseURL}, {"PrereleaseBaseURL", o.PrereleaseBaseURL}} {
		if f[1] == "" {
			continue
		}
		if err := checkURL(f[0], f[1]); err != nil {
			return err
		}
	}
	if o.PrereleaseIndex == "" || (o.IndexDir == "" && o.PagesBranch == "") {
		return nil
	}
	rel, err := prereleasePath(&o) // o is a copy: the check changes nothing
	if err != nil {
		return err
	}
	if o.PrereleaseBaseURL == "" && o.BaseURL != "" && rel == "" {
		return failure.Input(failure.Optionf("{{PrereleaseIndex}} %s is not under {{IndexDir}} %s, so its tarball URLs cannot be derived from {{BaseURL}}; pass {{PrereleaseBaseURL}} URL (where %s is served)",
			o.PrereleaseIndex, o.IndexDir, o.PrereleaseIndex))
	}
	return nil
}

func defaults(o *Options) error {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ModTime.IsZero() {
		o.ModTime = time.Unix(0, 0).UTC()
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if o.PrereleaseIndex == "" || (o.IndexDir == "" && o.PagesBranch == "") {
		return nil
	}
	rel, err := prereleasePath(o)
	if err != nil {
		return err
	}
	if o.PrereleaseBaseURL == "" && o.BaseURL != "" {
		o.PrereleaseBaseURL = strings.TrimRight(o.BaseURL, "/") + "/" + escapePath(rel)
	}
	return nil
}

// prereleasePath refuses a prerelease index in the stable index's place
// and returns its slash path below the stable root, or "" when
// it lies elsewhere. For a pages branch it also normalises PrereleaseIndex.
func prereleasePath(o *Options) (string, error) {
	if o.PagesBranch != "" {
		p := path.Clean(filepath.ToSlash(o.PrereleaseIndex))
		switch {
		case p == "." || p == "/":
			return "", failure.Input(failure.Optionf("{{PrereleaseIndex}} %q is the root of {{PagesBranch}} %s, where the stable index lives; prereleases never enter the stable index: name a subdirectory, e.g. prerelease",
				o.PrereleaseIndex, o.PagesBranch))
		case path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../"):
			return "", failure.Input(failure.Optionf("{{PrereleaseIndex}} %q: want a path inside {{PagesBranch}} %s, e.g. prerelease", o.PrereleaseIndex, o.PagesBranch))
		}
		o.PrereleaseIndex = p
		return p, nil
	}
	stable, err1 := filepath.Abs(o.IndexDir)
	pre, err2 := filepath.Abs(o.PrereleaseIndex)
	if err := errors.Join(err1, err2); err != nil {
		return "", failure.Optionf("resolving {{IndexDir}} and {{PrereleaseIndex}}: %w", err)
	}
	same := stable == pre
	if rs, err := filepath.EvalSymlinks(stable); err == nil {
		if rp, err := filepath.EvalSymlinks(pre); err == nil && rs == rp {
			same = true // one directory by two names
		}
	}
	if same {
		return "", failure.Input(failure.Optionf("{{PrereleaseIndex}} %s is {{IndexDir}} %s; prereleases never enter the stable index: give them their own directory, e.g. %s",
			o.PrereleaseIndex, o.IndexDir, filepath.Join(o.IndexDir, "prerelease")))
	}
	rel, err := filepath.Rel(stable, pre)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", nil
	}
	return filepath.ToSlash(rel), nil
}

// CheckOCI refuses an OCI target that is not oci://HOST/PATH with a valid
// port, or that carries credentials: registry logins supply those, and a
// target is printed and stored (input errors that never echo the secret).
func CheckOCI(target string) error {
	if !strings.HasPrefix(target, "oci://") {
		return failure.Input(failure.Optionf("{{OCI}} %q: want oci://HOST/PATH", redact.URL(target)))
	}
	return checkURL("OCI", target)
}

// checkURL refuses an unparseable URL, a port that is no port, and userinfo:
// a base URL is written into index.yaml for anyone to read.
func checkURL(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return failure.Input(failure.Optionf("{{"+field+"}}: not a URL: %w", redact.Err(err)))
	}
	if u.User != nil {
		return failure.Input(failure.Optionf("{{"+field+"}} %s: a URL with credentials would be printed, and a base URL is written into index.yaml for anyone to read; remove USER:PASSWORD@ (registries take credentials from docker login or CHARTPIN_REGISTRY_AUTH)",
			redact.URL(raw)))
	}
	if u.Host == "" {
		return failure.Input(failure.Optionf("{{"+field+"}} %q: no host", raw))
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return failure.Input(failure.Optionf("{{"+field+"}} %q: port %q is not a number from 1 to 65535", raw, p))
		}
	}
	return nil
}

func isHTTP(u string) bool {
	return strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")
}

// escapePath escapes each segment of a slash path for use in a URL.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func setAnnotation(ch *chart.Chart, key, value string) {
	if ch.Metadata.Annotations == nil {
		ch.Metadata.Annotations = map[string]string{}
	}
	ch.Metadata.Annotations[key] = value
}
