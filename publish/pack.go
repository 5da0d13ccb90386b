package publish

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/provenance"

	"github.com/chartpin/chartpin/internal/failure"
)

// packageChart saves ch with the Helm SDK and rewrites the archive with a
// fixed file time: Helm stamps time.Now() on every entry, so two packagings of
// one chart would never be byte-identical and "identical bytes → no-op" could
// never hold.
func packageChart(ch *chart.Chart, modTime time.Time) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "chartpin-package-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	path, err := chartutil.Save(ch, tmp)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Header.Extra, zw.Header.Comment, zw.Header.Name = zr.Header.Extra, zr.Header.Comment, zr.Header.Name
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("re-reading Helm's archive: %w", err)
		}
		h.ModTime, h.AccessTime, h.ChangeTime = modTime, time.Time{}, time.Time{}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// image is one entry of the chartpin.io/images annotation, in the shape
// Artifact Hub reads for artifacthub.io/images.
type image struct {
	Name  string `yaml:"name"`
	Image string `yaml:"image"`
}

// renderImages renders the chart with its default values and lists every
// container image the manifests name: what a default install runs.
func renderImages(ch *chart.Chart) (string, error) {
	vals, err := chartutil.ToRenderValues(ch, ch.Values, chartutil.ReleaseOptions{
		Name: ch.Name(), Namespace: "default", Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return "", err
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return "", err
	}
	seen := map[image]bool{}
	var list []image
	for name, body := range files {
		if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") {
			continue
		}
		dec := yaml.NewDecoder(strings.NewReader(body))
		for {
			var doc yaml.Node
			if err := dec.Decode(&doc); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return "", fmt.Errorf("%s: %w", name, err)
			}
			walkImages(&doc, func(img image) {
				if !seen[img] {
					seen[img] = true
					list = append(list, img)
				}
			})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Image != list[j].Image {
			return list[i].Image < list[j].Image
		}
		return list[i].Name < list[j].Name
	})
	if len(list) == 0 {
		return "[]\n", nil
	}
	out, err := yaml.Marshal(list)
	return string(out), err
}

// walkImages calls fn for every mapping with a scalar "image" (a container).
func walkImages(n *yaml.Node, fn func(image)) {
	if n.Kind == yaml.MappingNode {
		var img image
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.ScalarNode && k.Value == "image" {
				img.Image = v.Value
			}
			if v.Kind == yaml.ScalarNode && k.Value == "name" {
				img.Name = v.Value
			}
		}
		if img.Image != "" {
			fn(img)
		}
	}
	for _, c := range n.Content {
		walkImages(c, fn)
	}
}

// sign writes pkg to a temporary file and clear-signs it with Helm's
// provenance support; the result is the .prov file's content.
func sign(pkg []byte, filename string, o Options) ([]byte, error) {
	keyring := o.Keyring
	if keyring == "" {
		home, _ := os.UserHomeDir()
		keyring = filepath.Join(home, ".gnupg", "secring.gpg")
	}
	signer, err := provenance.NewFromKeyring(keyring, o.SignKey)
	if err != nil {
		return nil, failure.Optionf("loading signing key %q from %s: %w; pass {{Keyring}} with a secret keyring (gpg --export-secret-keys)", o.SignKey, keyring, err)
	}
	fetch := o.Passphrase
	if fetch == nil {
		fetch = func() ([]byte, error) { return nil, nil }
	}
	if err := signer.DecryptKey(func(string) ([]byte, error) { return fetch() }); err != nil {
		return nil, fmt.Errorf("unlocking signing key %q: %w; pass the passphrase file", o.SignKey, err)
	}
	tmp, err := os.MkdirTemp("", "chartpin-sign-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, filename)
	if err := os.WriteFile(path, pkg, 0o644); err != nil {
		return nil, err
	}
	sig, err := signer.ClearSign(path)
	if err != nil {
		return nil, fmt.Errorf("signing %s with %q: %w", filename, o.SignKey, err)
	}
	return []byte(sig), nil
}
