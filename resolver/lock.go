package resolver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/atomicfile"
)

// Lock is a digest lock file: fully qualified ref with tag → index digest
// (and, optionally, its media type and platforms so platform checks can run
// offline). A ref by digest (repo@sha256:…) records the platforms of a pin
// being replaced; a bare repository with tags: records the tag list a
// versions range was chosen from.
type Lock struct {
	mu      sync.Mutex
	entries map[string]LockEntry
	tags    map[string][]string // repository → tags
}

// LockEntry is one ref's record.
type LockEntry struct {
	Digest    string   `yaml:"digest"`
	MediaType string   `yaml:"mediaType,omitempty"`
	Platforms []string `yaml:"platforms,omitempty"`
	// Source is the ref the digest came from when a mirror served it.
	Source string `yaml:"source,omitempty"`
	// Signature is the signature a verify: policy accepted for this digest.
	Signature *LockSignature `yaml:"signature,omitempty"`
}

// LockSignature is a verified signature as the lock records it: enough for
// an offline run to verify the digest again from the lock and the policy's
// key or trusted root. The lock is not trusted for it: every field is
// checked again as if read from the registry.
type LockSignature struct {
	// Manifest is the digest of the manifest that carried the signature.
	Manifest string `yaml:"manifest"`
	// Payload is the signed payload, base64.
	Payload string `yaml:"payload"`
	// Signature is the signature over the payload, base64.
	Signature string `yaml:"signature"`
	// Certificate and Bundle are the keyless signing certificate (PEM)
	// and its transparency-log bundle (JSON), base64.
	Certificate string `yaml:"certificate,omitempty"`
	Bundle      string `yaml:"bundle,omitempty"`
	// SigstoreBundle is a sigstore bundle (JSON, base64) that verified
	// instead; it holds its own payload and signature.
	SigstoreBundle string `yaml:"sigstoreBundle,omitempty"`
}

// lockSignatureKeys are the keys of a signature: mapping, in writing order.
var lockSignatureKeys = []string{"manifest", "payload", "signature", "certificate", "bundle", "sigstoreBundle"}

var digestRE = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// NewLock returns an empty lock.
func NewLock() *Lock { return &Lock{entries: map[string]LockEntry{}, tags: map[string][]string{}} }

// ReadLock parses a lock file. Errors name the file and line.
func ReadLock(path string) (*Lock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading digest lock file: %w", err)
	}
	return ParseLock(path, data)
}

// ParseLock parses lock file bytes; name is used in errors.
func ParseLock(name string, data []byte) (*Lock, error) {
	var doc, next yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// A second document would be ignored by a YAML reader that stops at the
	// first, and read by one that does not: refuse it.
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:%d: a second YAML document; a lock file is one mapping of ref: digest", name, next.Line)
	}
	l := NewLock()
	if len(doc.Content) == 0 {
		return l, nil
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping of ref: digest", name, m.Line)
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if v.Kind == yaml.MappingNode && isTagList(v) {
			if err := l.parseTags(name, k, v); err != nil {
				return nil, err
			}
			continue
		}
		ref, err := Normalize(k.Value)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, k.Line, err)
		}
		var e LockEntry
		switch v.Kind {
		case yaml.ScalarNode:
			e.Digest = v.Value
		case yaml.MappingNode:
			for j := 0; j+1 < len(v.Content); j += 2 {
				if key := v.Content[j]; key.Value != "digest" && key.Value != "mediaType" && key.Value != "platforms" && key.Value != "source" && key.Value != "signature" {
					return nil, fmt.Errorf("%s:%d: %s: unknown key %q (want digest, mediaType, platforms, source, signature)", name, key.Line, k.Value, key.Value)
				} else if key.Value == "signature" {
					if err := checkSignatureKeys(v.Content[j+1]); err != nil {
						return nil, fmt.Errorf("%s:%d: %s: signature: %w", name, v.Content[j+1].Line, k.Value, err)
					}
				}
			}
			if err := v.Decode(&e); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, v.Line, err)
			}
		default:
			return nil, fmt.Errorf("%s:%d: %s: want a digest or {digest, platforms}", name, v.Line, k.Value)
		}
		if !digestRE.MatchString(e.Digest) {
			return nil, fmt.Errorf("%s:%d: %s: %q is not a sha256 digest", name, v.Line, k.Value, e.Digest)
		}
		if err := e.validate(); err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", name, v.Line, k.Value, err)
		}
		if _, d, byDigest := strings.Cut(ref, "@"); byDigest && d != e.Digest {
			return nil, fmt.Errorf("%s:%d: %s: digest %s differs from the one in the reference", name, v.Line, k.Value, e.Digest)
		}
		if _, dup := l.entries[ref]; dup {
			return nil, fmt.Errorf("%s:%d: %s appears twice", name, k.Line, k.Value)
		}
		l.entries[ref] = e
	}
	return l, nil
}

// isTagList reports whether a lock entry is a repository's tag list.
func isTagList(v *yaml.Node) bool {
	for j := 0; j+1 < len(v.Content); j += 2 {
		if v.Content[j].Value == "tags" {
			return true
		}
	}
	return false
}

// parseTags reads repository: {tags: [...]}.
func (l *Lock) parseTags(name string, k, v *yaml.Node) error {
	var e struct {
		Tags []string `yaml:"tags"`
	}
	if len(v.Content) != 2 {
		return fmt.Errorf("%s:%d: %s: a tag list holds tags: only", name, v.Line, k.Value)
	}
	if err := v.Decode(&e); err != nil {
		return fmt.Errorf("%s:%d: %w", name, v.Line, err)
	}
	repo, err := normalizeRepository(k.Value)
	if err != nil {
		return fmt.Errorf("%s:%d: %s: tags: belong to a repository without tag or digest: %w", name, k.Line, k.Value, err)
	}
	if _, dup := l.tags[repo]; dup {
		return fmt.Errorf("%s:%d: tags of %s appear twice", name, k.Line, k.Value)
	}
	for _, t := range e.Tags {
		if !tagRE.MatchString(t) {
			return fmt.Errorf("%s:%d: %s: %s is not an image tag", name, v.Line, k.Value, printable(t))
		}
	}
	l.tags[repo] = e.Tags
	return nil
}

var tagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// validate checks what a lock file says besides the digest, so that nothing
// it holds is printed or used unchecked (a platform string with a newline
// or a workflow command, say).
func (e LockEntry) validate() error {
	if e.MediaType != "" && !known(e.MediaType) {
		return fmt.Errorf("mediaType %s is neither an image manifest nor an index", printable(e.MediaType))
	}
	for _, p := range e.Platforms {
		if !validPlatform(p) {
			return fmt.Errorf("platform %s: want os/arch[/variant] of letters, digits, '.', '_' or '-'", printable(p))
		}
	}
	if e.Source != "" {
		if _, err := Normalize(e.Source); err != nil || strings.ContainsAny(e.Source, " \t\r\n") {
			return fmt.Errorf("source %s is not an image reference", printable(e.Source))
		}
	}
	if e.Signature != nil {
		return e.Signature.validate()
	}
	return nil
}

// checkSignatureKeys refuses a signature: that is not a mapping of known keys.
func checkSignatureKeys(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("want a mapping of %s", strings.Join(lockSignatureKeys, ", "))
	}
	for j := 0; j+1 < len(n.Content); j += 2 {
		if !slices.Contains(lockSignatureKeys, n.Content[j].Value) {
			return fmt.Errorf("unknown key %s (want %s)", printable(n.Content[j].Value), strings.Join(lockSignatureKeys, ", "))
		}
	}
	return nil
}

func (s *LockSignature) validate() error {
	if !digestRE.MatchString(s.Manifest) {
		return fmt.Errorf("signature manifest %s is not a sha256 digest", printable(s.Manifest))
	}
	simple := s.SigstoreBundle == "" // a payload and its signature, or a bundle
	for _, f := range []struct {
		name, v  string
		required bool
	}{{"payload", s.Payload, simple}, {"signature", s.Signature, simple}, {"certificate", s.Certificate, false}, {"bundle", s.Bundle, false}, {"sigstoreBundle", s.SigstoreBundle, false}} {
		if f.v == "" && !f.required {
			continue
		}
		if _, err := base64.StdEncoding.DecodeString(f.v); err != nil || f.v == "" {
			return fmt.Errorf("signature %s is not base64", f.name)
		}
	}
	return nil
}

// normalizeRepository returns registry/repository fully qualified.
func normalizeRepository(repo string) (string, error) {
	n, err := Normalize(repo + ":latest")
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(n, ":latest"), nil
}

// Get returns the entry for a ref (normalized first).
func (l *Lock) Get(ref string) (LockEntry, bool) {
	norm, err := Normalize(ref)
	if err != nil {
		return LockEntry{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[norm]
	return e, ok
}

// byDigest finds what the lock recorded of repository@digest: an entry by
// that digest (the platforms of a replaced pin), else a ref of that
// repository locked to that digest, preferring one that records platforms
// or a media type.
func (l *Lock) byDigest(digestRef string) (LockEntry, bool) {
	repo, digest, _ := strings.Cut(digestRef, "@")
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[digestRef]; ok {
		return e, true
	}
	keys := make([]string, 0, len(l.entries))
	for k := range l.entries {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same answer every run
	var found *LockEntry
	for _, k := range keys {
		if e := l.entries[k]; e.Digest == digest && trimTag(k) == repo {
			if len(e.Platforms) > 0 || e.MediaType != "" {
				return e, true
			}
			if found == nil {
				found = &e
			}
		}
	}
	if found != nil {
		return *found, true
	}
	return LockEntry{}, false
}

// Signature returns the signature recorded for repository@digest.
func (l *Lock) Signature(repository, digest string) (LockSignature, bool) {
	repo, err := normalizeRepository(repository)
	if err != nil {
		return LockSignature{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.entries))
	for k := range l.entries {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same answer every run
	for _, k := range keys {
		if e := l.entries[k]; e.Digest == digest && e.Signature != nil && trimTag(k) == repo {
			return *e.Signature, true
		}
	}
	return LockSignature{}, false
}

// SetSignature records the verified signature of repository@digest on
// every entry of that repository locked to that digest, or under
// repository@digest when none is.
func (l *Lock) SetSignature(repository, digest string, sig LockSignature) {
	repo, err := normalizeRepository(repository)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	recorded := false
	for k, e := range l.entries {
		if e.Digest == digest && trimTag(k) == repo {
			e.Signature = &sig
			l.entries[k] = e
			recorded = true
		}
	}
	if !recorded {
		l.entries[repo+"@"+digest] = LockEntry{Digest: digest, Signature: &sig}
	}
}

// Set records an entry.
func (l *Lock) Set(ref string, e LockEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries[ref] = e
}

// Bytes renders the lock file, sorted by ref.
func (l *Lock) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	refs := make([]string, 0, len(l.entries)+len(l.tags))
	for r := range l.entries {
		refs = append(refs, r)
	}
	for r := range l.tags {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	var b bytes.Buffer
	b.WriteString("# ref (fully qualified, with tag): index digest — written by chartpin\n")
	for _, r := range refs {
		e, ok := l.entries[r]
		if !ok {
			fmt.Fprintf(&b, "%s: {tags: [%s]}\n", r, strings.Join(l.tags[r], ", "))
			continue
		}
		if len(e.Platforms) == 0 && e.Source == "" && e.MediaType == "" && e.Signature == nil {
			fmt.Fprintf(&b, "%s: %s\n", r, e.Digest)
			continue
		}
		fmt.Fprintf(&b, "%s: {digest: %s", r, e.Digest)
		if e.MediaType != "" {
			fmt.Fprintf(&b, ", mediaType: %s", e.MediaType)
		}
		if len(e.Platforms) > 0 {
			fmt.Fprintf(&b, ", platforms: [%s]", strings.Join(e.Platforms, ", "))
		}
		if e.Source != "" {
			fmt.Fprintf(&b, ", source: %s", e.Source)
		}
		if s := e.Signature; s != nil {
			// Quoted: a base64 string can read as a number or a boolean.
			fmt.Fprintf(&b, ", signature: {manifest: %s", s.Manifest)
			if s.SigstoreBundle == "" {
				fmt.Fprintf(&b, ", payload: %q, signature: %q", s.Payload, s.Signature)
			}
			if s.Certificate != "" {
				fmt.Fprintf(&b, ", certificate: %q", s.Certificate)
			}
			if s.Bundle != "" {
				fmt.Fprintf(&b, ", bundle: %q", s.Bundle)
			}
			if s.SigstoreBundle != "" {
				fmt.Fprintf(&b, ", sigstoreBundle: %q", s.SigstoreBundle)
			}
			b.WriteString("}")
		}
		b.WriteString("}\n")
	}
	return b.Bytes()
}

// WriteFile writes the lock file atomically, never over a chart file (CheckLockPath).
func (l *Lock) WriteFile(path string) error {
	if err := CheckLockPath(path); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, l.Bytes(), 0o644)
}

// offline answers from a lock file and never touches the network.
type offline struct{ lock *Lock }

// NewOffline resolves from lock only; a missing entry is ErrNotInLock.
func NewOffline(lock *Lock) Interface { return offline{lock} }

func (o offline) Resolve(_ context.Context, ref string) (Image, error) {
	norm, err := Normalize(ref)
	if err != nil {
		return Image{}, err
	}
	if _, digest, byDigest := strings.Cut(norm, "@"); byDigest {
		// A digest names itself: the lock may only add what it recorded of it.
		img := Image{Ref: norm, Source: norm, Digest: digest}
		if e, ok := o.lock.byDigest(norm); ok {
			img.Platforms = e.Platforms
		}
		return img, nil
	}
	e, ok := o.lock.Get(norm)
	if !ok {
		return Image{}, fmt.Errorf("%s: %w: add it to the digest lock file or resolve online", norm, ErrNotInLock)
	}
	src := norm
	if e.Source != "" {
		src = e.Source
	}
	return Image{Ref: norm, Source: src, Digest: e.Digest, MediaType: e.MediaType, Platforms: e.Platforms}, nil
}

// Manifest answers from the lock: what it recorded of the digest in that
// repository (written by a run that verified it). Nothing is fetched.
func (o offline) Manifest(_ context.Context, ref string) (Manifest, error) {
	norm, err := Normalize(ref)
	if err != nil {
		return Manifest{}, err
	}
	_, digest, ok := strings.Cut(norm, "@")
	if !ok {
		return Manifest{}, fmt.Errorf("manifest of %s: want a reference by digest (repository@sha256:…)", norm)
	}
	m := Manifest{Ref: norm, Source: norm, Digest: digest}
	if e, ok := o.lock.byDigest(norm); ok {
		m.MediaType, m.Platforms = e.MediaType, e.Platforms
	}
	return m, nil
}

// Platforms answers from what the lock recorded of img's digest.
func (o offline) Platforms(ctx context.Context, img Image) ([]string, error) {
	if len(img.Platforms) > 0 {
		return img.Platforms, nil
	}
	m, err := o.Manifest(ctx, DigestRef(img.Ref, img.Digest))
	if err != nil {
		return nil, err
	}
	if len(m.Platforms) > 0 || (m.MediaType != "" && !m.IsIndex()) {
		return m.Platforms, nil
	}
	return nil, fmt.Errorf("%s: %w: the lock entry has no platforms; record them as {digest: …, platforms: [...]} to check platforms offline", img.Ref, ErrNotInLock)
}

// Tags answers from a tag list recorded by --write-digests.
func (o offline) Tags(_ context.Context, repository string) ([]string, error) {
	repo, err := normalizeRepository(repository)
	if err != nil {
		return nil, err
	}
	o.lock.mu.Lock()
	defer o.lock.mu.Unlock()
	tags, ok := o.lock.tags[repo]
	if !ok {
		return nil, fmt.Errorf("listing tags of %s: %w offline: the lock file records no tags of it; record the lock online", repository, ErrUnsupported)
	}
	return append([]string(nil), tags...), nil
}

// Recorder wraps an Interface and records every resolved ref into a Lock
// (--write-digests), with platforms where they were read.
type Recorder struct {
	inner Interface
	lock  *Lock
}

// NewRecorder records what inner resolves.
func NewRecorder(inner Interface) *Recorder { return &Recorder{inner: inner, lock: NewLock()} }

// Lock is what was recorded so far.
func (r *Recorder) Lock() *Lock { return r.lock }

// Resolve implements Interface.
func (r *Recorder) Resolve(ctx context.Context, ref string) (Image, error) {
	img, err := r.inner.Resolve(ctx, ref)
	if err == nil {
		r.lock.mu.Lock()
		if e, ok := r.lock.entries[img.Ref]; !ok || e.Digest != img.Digest {
			e = LockEntry{Digest: img.Digest, Platforms: img.Platforms}
			if img.Source != img.Ref {
				e.Source = img.Source
			}
			r.lock.entries[img.Ref] = e
		}
		r.lock.mu.Unlock()
	}
	return img, err
}

// Platforms implements Interface.
func (r *Recorder) Platforms(ctx context.Context, img Image) ([]string, error) {
	p, err := r.inner.Platforms(ctx, img)
	if err == nil && len(p) > 0 {
		r.lock.mu.Lock()
		if e, ok := r.lock.entries[img.Ref]; ok && e.Digest == img.Digest {
			e.Platforms = p
			r.lock.entries[img.Ref] = e
		}
		r.lock.mu.Unlock()
	}
	return p, err
}

// Manifest implements Interface and records the media type and platforms
// read for every entry of that repository and digest, or, for a digest no
// entry holds (the pin a new one replaces), under repository@digest, so
// that an offline run can check the move too.
func (r *Recorder) Manifest(ctx context.Context, ref string) (Manifest, error) {
	m, err := r.inner.Manifest(ctx, ref)
	if err != nil {
		return m, err
	}
	repo, _, _ := strings.Cut(m.Ref, "@")
	r.lock.mu.Lock()
	defer r.lock.mu.Unlock()
	recorded := false
	for k, e := range r.lock.entries {
		if e.Digest == m.Digest && trimTag(k) == repo {
			e.MediaType, e.Platforms = m.MediaType, m.Platforms
			r.lock.entries[k] = e
			recorded = true
		}
	}
	if !recorded {
		r.lock.entries[m.Ref] = LockEntry{Digest: m.Digest, MediaType: m.MediaType, Platforms: m.Platforms}
	}
	return m, nil
}

// Tags implements Interface and records the list, so that an offline run
// picks a versions range from the same tags.
func (r *Recorder) Tags(ctx context.Context, repository string) ([]string, error) {
	tags, err := r.inner.Tags(ctx, repository)
	if err != nil {
		return tags, err
	}
	if repo, nerr := normalizeRepository(repository); nerr == nil {
		r.lock.mu.Lock()
		r.lock.tags[repo] = append([]string(nil), tags...)
		r.lock.mu.Unlock()
	}
	return tags, nil
}

// CheckLockPath refuses a lock file path that would overwrite or join
// a chart: a path inside a directory that holds a Chart.yaml (or below
// one), and an existing file that is not a digest lock file. A lock file
// written there would replace a chart file or ship inside the package.
func CheckLockPath(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("lock file %s: %w", path, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err == nil && fi.Mode().IsRegular() {
			return fmt.Errorf("lock file %s: %s is inside the chart %s; write the lock file outside every chart directory", path, abs, dir)
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	fi, err := os.Lstat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("lock file %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("lock file %s: not a regular file; name a lock file", path)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return fmt.Errorf("lock file %s: %w", path, err)
	}
	if _, err := ParseLock(path, data); err != nil {
		return fmt.Errorf("lock file %s: the file exists and is not a digest lock file, so it is not replaced (%w); name a new file or a lock file", path, err)
	}
	return nil
}
