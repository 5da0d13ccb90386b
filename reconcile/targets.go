package reconcile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/signature"
)

// Workload kinds a target may name.
const (
	KindDeployment  = "Deployment"
	KindDaemonSet   = "DaemonSet"
	KindStatefulSet = "StatefulSet"
)

// File is a parsed targets file (the library chart's ConfigMap key targets.yaml).
type File struct {
	// Path names the file in errors.
	Path string
	// Mirror is the registry that serves the pulls on this edge ("" = none);
	// images in Targets already carry it.
	Mirror string
	// PullSecrets are read, in order, for registry credentials.
	PullSecrets []SecretRef
	Targets     []Target
}

// SecretRef names a kubernetes.io/dockerconfigjson Secret.
type SecretRef struct {
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
	// Optional: a workload's imagePullSecret, skipped when absent as the
	// kubelet skips it. The chart's own Secret must exist.
	Optional bool `yaml:"optional"`
}

// Target is one container of one workload that runs a floating tag.
type Target struct {
	// ID is unique within the file.
	ID        string `yaml:"id"`
	Kind      string `yaml:"kind"`
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
	Container string `yaml:"container"`
	// Image is registry/repository:tag as the pull sees it (mirror applied).
	Image string `yaml:"image"`
	// Follows is the ID of the target whose digest this container runs.
	Follows string `yaml:"follows"`
	// Verify is the signature policy a new digest must meet (nil: none).
	Verify *Verify `yaml:"verify"`
	// Line is where the entry starts in the file.
	Line int `yaml:"-"`
}

// Verify is a target's signature policy, as the chart renders it from the
// image block's verify: (the PEM and the trusted root themselves: the pod
// has no chartpin.yaml): Key, or Identity and Issuer under TrustedRoot.
type Verify struct {
	// Key is a PEM public key (cosign.pub).
	Key string `yaml:"key"`
	// Identity and Issuer are the keyless signer's certificate identity and
	// OIDC issuer, exact strings.
	Identity string `yaml:"identity"`
	Issuer   string `yaml:"issuer"`
	// TrustedRoot is the text of trusted_root.json.
	TrustedRoot string `yaml:"trustedRoot"`
	policy      *signature.Policy
}

// parse reads the policy; where names the entry in messages.
func (v *Verify) parse(where string) (*signature.Policy, error) {
	keyless := v.Identity != "" || v.Issuer != "" || v.TrustedRoot != ""
	switch {
	case v.Key != "" && keyless:
		return nil, fmt.Errorf("%s: verify: has key and a keyless identity; give one policy", where)
	case v.Key != "":
		return signature.ParseKey(where+" verify.key", []byte(v.Key))
	case !keyless:
		return nil, fmt.Errorf("%s: verify: needs key (a PEM public key) or identity, issuer and trustedRoot", where)
	case v.TrustedRoot == "":
		return nil, fmt.Errorf("%s: verify: identity needs trustedRoot (the text of trusted_root.json)", where)
	}
	return signature.ParseKeyless(where+" verify.trustedRoot", v.Identity, v.Issuer, []byte(v.TrustedRoot))
}

// Workload is "Kind namespace/name".
func (t Target) Workload() string { return t.Kind + " " + t.Namespace + "/" + t.Name }

func (t Target) key() workloadKey { return workloadKey{t.Kind, t.Namespace, t.Name} }

type fileYAML struct {
	Mirror      string      `yaml:"mirror"`
	PullSecrets []SecretRef `yaml:"pullSecrets"`
	Targets     []Target    `yaml:"targets"`
}

// ReadTargets reads and validates a targets file.
func ReadTargets(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, failure.Input(failure.Optionf("reading targets: %w; pass {{Targets}} with the file the chart's ConfigMap mounts", err))
	}
	return ParseTargets(path, data)
}

// ParseTargets parses and validates a targets file; every problem is an input
// error naming file:line.
func ParseTargets(path string, data []byte) (*File, error) {
	var raw fileYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return nil, failure.Input(fmt.Errorf("%s: %w", path, err))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, failure.Input(fmt.Errorf("%s: %w", path, err))
	}
	lines := targetLines(&doc)
	f := &File{Path: path, Mirror: strings.TrimSpace(raw.Mirror), PullSecrets: raw.PullSecrets, Targets: raw.Targets}
	for i := range f.Targets {
		if i < len(lines) {
			f.Targets[i].Line = lines[i]
		}
	}
	if err := f.validate(); err != nil {
		return nil, failure.Input(err)
	}
	return f, nil
}

// targetLines returns the line of each entry under targets:.
func targetLines(doc *yaml.Node) []int {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "targets" && m.Content[i+1].Kind == yaml.SequenceNode {
			var out []int
			for _, n := range m.Content[i+1].Content {
				out = append(out, n.Line)
			}
			return out
		}
	}
	return nil
}

func (f *File) validate() error {
	if len(f.Targets) == 0 {
		return fmt.Errorf("%s: no targets; the chart renders at least one when the reconcile is enabled", f.Path)
	}
	byID := map[string]*Target{}
	containers := map[string]string{}
	var errs []error
	bad := func(t *Target, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: target %q: %s", f.Path, t.Line, t.ID, fmt.Sprintf(format, args...)))
	}
	for i := range f.Targets {
		t := &f.Targets[i]
		switch {
		case t.ID == "":
			bad(t, "no id")
		case byID[t.ID] != nil:
			bad(t, "duplicate id (first at line %d)", byID[t.ID].Line)
		default:
			byID[t.ID] = t
		}
		switch t.Kind {
		case KindDeployment, KindDaemonSet, KindStatefulSet:
		default:
			bad(t, "kind %q: want Deployment, DaemonSet or StatefulSet", t.Kind)
		}
		if t.Namespace == "" || t.Name == "" || t.Container == "" {
			bad(t, "namespace, name and container are all required")
		}
		c := t.Workload() + " container " + t.Container
		if prev, ok := containers[c]; ok {
			bad(t, "%s is already target %q", c, prev)
		}
		containers[c] = t.ID
		switch {
		case t.Follows == "" && t.Image == "":
			bad(t, "needs image (registry/repository:tag) or follows (another target's id)")
		case t.Image != "" && strings.Contains(t.Image, "@"):
			bad(t, "image %q is already pinned by digest; the reconcile only follows floating tags, leave pinned images out of the file", t.Image)
		case t.Image != "" && f.Mirror != "" && !strings.HasPrefix(t.Image, f.Mirror+"/"):
			bad(t, "image %q does not carry the mirror %q; the chart must render the mirror into every image", t.Image, f.Mirror)
		}
	}
	for i := range f.Targets {
		t := &f.Targets[i]
		if t.Verify == nil {
			continue
		}
		p, err := t.Verify.parse(fmt.Sprintf("%s:%d: target %q", f.Path, t.Line, t.ID))
		switch {
		case t.Follows != "":
			bad(t, "verify: on a target that follows %q; a follower runs its digest, so put verify: on that target", t.Follows)
		case err != nil:
			errs = append(errs, err)
		default:
			t.Verify.policy = p
		}
	}
	for _, s := range f.PullSecrets {
		if s.Namespace == "" || s.Name == "" {
			errs = append(errs, fmt.Errorf("%s: pullSecrets: namespace and name are both required (got %q/%q)", f.Path, s.Namespace, s.Name))
		}
	}
	for i := range f.Targets {
		t := &f.Targets[i]
		if t.Follows == "" {
			continue
		}
		lead := byID[t.Follows]
		switch {
		case lead == nil:
			bad(t, "follows %q: no such target", t.Follows)
		case lead.Follows != "":
			bad(t, "follows %q, which itself follows %q; follow %q directly", t.Follows, lead.Follows, lead.Follows)
		case t.Image != "" && repository(t.Image) != repository(lead.Image):
			bad(t, "image %q differs from %q that it follows; drop one of image and follows", t.Image, lead.Image)
		}
	}
	return errors.Join(errs...)
}
