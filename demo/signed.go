package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/cosigned"
	"github.com/chartpin/chartpin/pin"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/signature"
)

// signedRelease turns verify: on for the chart copy's images, signs every
// image the registry holds with a key made for this run (what `cosign sign
// --key` writes), then moves the first image's tag to an unsigned build:
// pin refuses it and writes nothing, and pins it once it is signed.
func signedRelease(ctx context.Context, w io.Writer, dir, cfgPath, host string, imgs []resolver.Image, newResolver func() (*resolver.Remote, error)) error {
	key, err := cosigned.NewKey()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cosign.pub"), key.PublicPEM(), 0o644); err != nil {
		return err
	}
	if err := requireSignatures(cfgPath, "cosign.pub"); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== signed release (chartpin.yaml: verify: {key: cosign.pub} on every image; a key made for this run)\n")
	sign := func(ref, digest string) error {
		_, err := key.Push(resolver.RepositoryOf(mirrored(ref, host)), digest, []name.Option{name.Insecure}, remote.WithContext(ctx))
		return err
	}
	for _, img := range imgs {
		if err := sign(img.Ref, img.Digest); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "signed %d images at their sha256-<hex>.sig tags, as `cosign sign --key cosign.key --tlog-upload=false` does\n", len(imgs))

	moved := imgs[0].Ref
	tag, err := name.NewTag(mirrored(moved, host), name.Insecure)
	if err != nil {
		return err
	}
	unsigned, err := pushIndex(ctx, tag, tag.RepositoryStr()+":"+tag.TagStr()+" unsigned rebuild", Platforms)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s now names %s, an unsigned build\n", moved, unsigned)
	plan := func() (*pin.Result, error) {
		r, err := newResolver()
		if err != nil {
			return nil, err
		}
		return pin.Plan(ctx, pin.Options{ConfigPath: cfgPath, Resolver: r, Signatures: signature.NewChecker(r)})
	}
	res, err := plan()
	if res == nil || !res.Refused() {
		return fmt.Errorf("the unsigned build was not refused: %v", err)
	}
	fmt.Fprintf(w, "\n== chartpin pin (refused: exit 1, nothing written)\n")
	for _, c := range res.Charts {
		for _, f := range c.Refused {
			fmt.Fprintf(w, "REFUSED %s:%d %s: %s\n", relTo(dir, f.File), f.Line, f.Path, f.Reason)
		}
	}

	if err := sign(moved, unsigned); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== chartpin pin, once %s is signed\n", unsigned[:19])
	if res, err = plan(); err != nil {
		return err
	}
	if err := res.Apply(); err != nil {
		return err
	}
	for _, c := range res.Charts {
		for _, p := range c.Pins {
			if !p.Changed {
				continue
			}
			why := "signature verified"
			if p.Follows != "" {
				why = "follows " + p.Follows
			}
			fmt.Fprintf(w, "pinned %s:%d %s %s (%s)\n", relTo(dir, p.File), p.Line, p.Path, p.NewDigest, why)
		}
		fmt.Fprintf(w, "chart %s: version %s -> %s, appVersion %s -> %s\n", c.Name, c.OldVersion, c.NewVersion, c.OldAppVersion, c.NewAppVersion)
	}
	if !res.Changed() {
		return errors.New("the signed build was not pinned")
	}
	return nil
}

// relTo is path relative to dir, for shorter lines.
func relTo(dir, path string) string {
	if r, err := filepath.Rel(dir, path); err == nil {
		return r
	}
	return path
}

// requireSignatures adds verify: {key: key} to every image of the config
// that pins its own digest (one that follows another is checked through it).
func requireSignatures(cfgPath, key string) error {
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", cfgPath, err)
	}
	if len(doc.Content) == 0 {
		return fmt.Errorf("%s: empty", cfgPath)
	}
	charts := field(doc.Content[0], "charts")
	if charts == nil {
		return fmt.Errorf("%s: no charts:", cfgPath)
	}
	for _, c := range charts.Content {
		images := field(c, "images")
		if images == nil {
			continue
		}
		for _, img := range images.Content {
			if field(img, "follows") != nil {
				continue
			}
			img.Content = append(img.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Value: "verify"},
				&yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Content: []*yaml.Node{
					{Kind: yaml.ScalarNode, Value: "key"}, {Kind: yaml.ScalarNode, Value: key},
				}})
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	return os.WriteFile(cfgPath, b.Bytes(), 0o644)
}

// field is the value of key in mapping n, or nil.
func field(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
