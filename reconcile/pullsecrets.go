package reconcile

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PullSecrets is a keychain filled, at the start of each tick, from the
// Secrets the targets file names (the chart's own dockerconfigjson Secret and
// the workloads' imagePullSecrets). It answers a registry the way the kubelet
// picks pull credentials: the most specific matching key wins (host globs like
// *.example.com, port, then path prefix), and a Docker Hub image also matches
// index.docker.io. Pass it to the resolver (resolver.Options.Keychain) and to the
// Reconciler (WithPullSecrets). Unlike the kubelet, which tries every match
// until a pull succeeds, it offers only the first: a refusal fails the tick.
type PullSecrets struct {
	mu      sync.RWMutex
	entries []pullEntry // longest key first
}

type pullEntry struct {
	key  string // host[:port][/path], scheme and /v1/ or /v2/ dropped
	auth authn.AuthConfig
}

// NewPullSecrets returns an empty keychain (anonymous until a tick loads it).
func NewPullSecrets() *PullSecrets { return &PullSecrets{} }

// Resolve implements authn.Keychain.
func (p *PullSecrets) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if p == nil {
		return authn.Anonymous, nil
	}
	target := r.String()
	if host, rest, ok := strings.Cut(target, "/"); ok && host == "index.docker.io" {
		target = "docker.io/" + rest
	} else if target == "index.docker.io" {
		target = "docker.io"
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, e := range p.entries {
		if urlsMatch(e.key, target) {
			return authn.FromConfig(e.auth), nil
		}
	}
	if isDockerHub(target) {
		for _, e := range p.entries {
			if e.key == "index.docker.io" {
				return authn.FromConfig(e.auth), nil
			}
		}
	}
	return authn.Anonymous, nil
}

// set replaces the credentials; the order of entries is kept among equal keys.
func (p *PullSecrets) set(entries []pullEntry) {
	sort.SliceStable(entries, func(i, j int) bool { return len(entries[i].key) > len(entries[j].key) })
	p.mu.Lock()
	p.entries = entries
	p.mu.Unlock()
}

// loadPullSecrets reads every Secret the file names, in order. A Secret the
// chart names explicitly must exist; a workload's pull secret that does not
// is skipped, as the kubelet skips it. Any other error fails the tick.
func (r *Reconciler) loadPullSecrets(ctx context.Context, f *File) error {
	if r.o.PullSecrets == nil || len(f.PullSecrets) == 0 {
		return nil
	}
	var entries []pullEntry
	for _, ref := range f.PullSecrets {
		rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
		s, err := r.client.CoreV1().Secrets(ref.Namespace).Get(rctx, ref.Name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err) && ref.Optional:
			r.o.Logger.Warn("pull secret not found; skipped, as the kubelet skips it", "secret", ref.Namespace+"/"+ref.Name)
			continue
		case err != nil:
			return fmt.Errorf("%s: reading pull secret %s/%s: %w; nothing was changed: create the Secret, or check the reconcile Role grants get on it", f.Path, ref.Namespace, ref.Name, err)
		}
		e, err := dockerConfigEntries(s)
		if err != nil {
			return fmt.Errorf("%s: pull secret %s/%s: %w; nothing was changed", f.Path, ref.Namespace, ref.Name, err)
		}
		entries = append(entries, e...)
	}
	r.o.PullSecrets.set(entries)
	return nil
}

// dockerConfigEntries reads a kubernetes.io/dockerconfigjson or
// kubernetes.io/dockercfg Secret. Errors never quote the data.
func dockerConfigEntries(s *corev1.Secret) ([]pullEntry, error) {
	type entry struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Auth     string `json:"auth"`
	}
	var auths map[string]entry
	switch s.Type {
	case corev1.SecretTypeDockerConfigJson:
		var cfg struct {
			Auths map[string]entry `json:"auths"`
		}
		if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
			return nil, fmt.Errorf("%s is not valid JSON (the content is not shown)", corev1.DockerConfigJsonKey)
		}
		auths = cfg.Auths
	case corev1.SecretTypeDockercfg:
		if err := json.Unmarshal(s.Data[corev1.DockerConfigKey], &auths); err != nil {
			return nil, fmt.Errorf("%s is not valid JSON (the content is not shown)", corev1.DockerConfigKey)
		}
	default:
		return nil, fmt.Errorf("type %q: want %s (kubectl create secret docker-registry)", s.Type, corev1.SecretTypeDockerConfigJson)
	}
	keys := make([]string, 0, len(auths))
	for k := range auths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []pullEntry
	for _, k := range keys {
		a := auths[k]
		if a.Username == "" && a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("the auth field for %s is not base64 (the value is not shown)", k)
			}
			a.Username, a.Password, _ = strings.Cut(string(raw), ":")
		}
		key, err := configKey(k)
		if err != nil {
			return nil, err
		}
		out = append(out, pullEntry{key: key, auth: authn.AuthConfig{Username: a.Username, Password: a.Password}})
	}
	return out, nil
}

// configKey is a docker config key as the kubelet stores it: no scheme, and
// /v1/ or /v2/ mean the host itself.
func configKey(k string) (string, error) {
	u, err := parseSchemeless(k)
	if err != nil {
		return "", fmt.Errorf("registry key %q: %w", k, err)
	}
	path := u.Path
	if strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v2/") {
		path = path[3:]
	}
	if path == "" || path == "/" {
		return u.Host, nil
	}
	return u.Host + path, nil
}

func parseSchemeless(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	return url.Parse(s)
}

// urlsMatch is the kubelet's rule: same number of host labels, each matching
// its glob, same port, and the key's path a prefix of the image's.
func urlsMatch(key, target string) bool {
	k, err := parseSchemeless(key)
	if err != nil {
		return false
	}
	t, err := parseSchemeless(target)
	if err != nil {
		return false
	}
	kl, tl := strings.Split(k.Hostname(), "."), strings.Split(t.Hostname(), ".")
	if len(kl) != len(tl) || k.Port() != t.Port() {
		return false
	}
	for i := range kl {
		if ok, _ := filepath.Match(kl[i], tl[i]); !ok {
			return false
		}
	}
	return strings.HasPrefix(t.Path, k.Path)
}

// isDockerHub reports whether an image lives on Docker Hub.
func isDockerHub(image string) bool {
	host, _, ok := strings.Cut(image, "/")
	if !ok {
		return true
	}
	return host == "docker.io" || host == "index.docker.io" || (!strings.ContainsAny(host, ".:") && host != "localhost")
}
