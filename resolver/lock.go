package resolver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/atomicfile"
)

// Lock is a digest lock file: fully qualified ref with tag → index digest
// (and, optionally, its platforms so a platforms check can run offline).
type Lock struct {
	mu      sync.Mutex
	entries map[string]LockEntry
}

// LockEntry is one ref's record.
type LockEntry struct {
	Digest    string   `yaml:"digest"`
	Platforms []string `yaml:"platforms,omitempty"`
	// Source is the ref the digest came from when a mirror served it.
	Source string `yaml:"source,omitempty"`
}

var digestRE = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// NewLock returns an empty lock.
func NewLock() *Lock { return &Lock{entries: map[string]LockEntry{}} }

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
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
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
				if key := v.Content[j]; key.Value != "digest" && key.Value != "platforms" && key.Value != "source" {
					return nil, fmt.Errorf("%s:%d: %s: unknown key %q (want digest, platforms, source)", name, key.Line, k.Value, key.Value)
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
		if _, dup := l.entries[ref]; dup {
			return nil, fmt.Errorf("%s:%d: %s appears twice", name, k.Line, k.Value)
		}
		l.entries[ref] = e
	}
	return l, nil
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

// byDigest finds the entry of repository@digest: a ref of that repository
// locked to that digest.
func (l *Lock) byDigest(digestRef string) (LockEntry, bool) {
	repo, digest, _ := strings.Cut(digestRef, "@")
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.entries))
	for k := range l.entries {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same answer every run
	for _, k := range keys {
		if e := l.entries[k]; e.Digest == digest && trimTag(k) == repo {
			return e, true
		}
	}
	return LockEntry{}, false
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
	refs := make([]string, 0, len(l.entries))
	for r := range l.entries {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	var b bytes.Buffer
	b.WriteString("# ref (fully qualified, with tag): index digest — written by chartpin\n")
	for _, r := range refs {
		e := l.entries[r]
		if len(e.Platforms) == 0 && e.Source == "" {
			fmt.Fprintf(&b, "%s: %s\n", r, e.Digest)
			continue
		}
		fmt.Fprintf(&b, "%s: {digest: %s", r, e.Digest)
		if len(e.Platforms) > 0 {
			fmt.Fprintf(&b, ", platforms: [%s]", strings.Join(e.Platforms, ", "))
		}
		if e.Source != "" {
			fmt.Fprintf(&b, ", source: %s", e.Source)
		}
		b.WriteString("}\n")
	}
	return b.Bytes()
}

// WriteFile writes the lock file atomically.
func (l *Lock) WriteFile(path string) error {
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
		return Image{}, fmt.Errorf("%s: %w: add it to the --digests file or resolve online", norm, ErrNotInLock)
	}
	src := norm
	if e.Source != "" {
		src = e.Source
	}
	return Image{Ref: norm, Source: src, Digest: e.Digest, Platforms: e.Platforms}, nil
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
		m.Platforms = e.Platforms
	}
	return m, nil
}

func (o offline) Platforms(_ context.Context, img Image) ([]string, error) {
	if len(img.Platforms) > 0 {
		return img.Platforms, nil
	}
	if e, ok := o.lock.Get(img.Ref); ok && e.Digest == img.Digest && len(e.Platforms) > 0 {
		return e.Platforms, nil
	}
	return nil, fmt.Errorf("%s: %w: the --digests entry has no platforms; record them as {digest: …, platforms: [...]} to check platforms offline", img.Ref, ErrNotInLock)
}

func (o offline) Tags(_ context.Context, repository string) ([]string, error) {
	return nil, fmt.Errorf("listing tags of %s: %w offline (--digests)", repository, ErrUnsupported)
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

// Manifest implements Interface and records the platforms read for every
// entry of that repository and digest.
func (r *Recorder) Manifest(ctx context.Context, ref string) (Manifest, error) {
	m, err := r.inner.Manifest(ctx, ref)
	if err != nil || len(m.Platforms) == 0 {
		return m, err
	}
	repo, _, _ := strings.Cut(m.Ref, "@")
	r.lock.mu.Lock()
	for k, e := range r.lock.entries {
		if e.Digest == m.Digest && trimTag(k) == repo {
			e.Platforms = m.Platforms
			r.lock.entries[k] = e
		}
	}
	r.lock.mu.Unlock()
	return m, err
}

// Tags implements Interface.
func (r *Recorder) Tags(ctx context.Context, repository string) ([]string, error) {
	return r.inner.Tags(ctx, repository)
}
