package dist

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// spdx is the subset of an SPDX 2.3 JSON document chartpin writes.
type spdx struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      spdxCreation   `json:"creationInfo"`
	Packages          []spdxPackage  `json:"packages"`
	Relationships     []spdxRelation `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string    `json:"name"`
	SPDXID           string    `json:"SPDXID"`
	VersionInfo      string    `json:"versionInfo"`
	DownloadLocation string    `json:"downloadLocation"`
	FilesAnalyzed    bool      `json:"filesAnalyzed"`
	Checksums        []spdxSum `json:"checksums,omitempty"`
	ExternalRefs     []spdxRef `json:"externalRefs,omitempty"`
	Comment          string    `json:"comment,omitempty"`
}

type spdxSum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelation struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// SBOM returns an SPDX 2.3 JSON document for the binaries (platform → path):
// chartpin at version, the Go standard library, and every module compiled
// into at least one binary, read from the binaries' own build information,
// so it lists what ships rather than what go.mod mentions. Packages are
// sorted and created is given: the same binaries give the same bytes.
func SBOM(version string, created time.Time, binaries map[string]string) ([]byte, error) {
	type module struct{ path, version, sum string }
	modules := map[string]module{}
	usedBy := map[string][]string{}
	var mainPath, goVersion string
	platforms := make([]string, 0, len(binaries))
	for p := range binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	for _, p := range platforms {
		info, err := buildinfo.ReadFile(binaries[p])
		if err != nil {
			return nil, fmt.Errorf("reading build information of %s: %w", binaries[p], err)
		}
		if goVersion != "" && info.GoVersion != goVersion {
			return nil, fmt.Errorf("%s was built by %s, the others by %s: build every platform with one toolchain", binaries[p], info.GoVersion, goVersion)
		}
		mainPath, goVersion = info.Main.Path, info.GoVersion
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			key := d.Path + "@" + d.Version
			modules[key] = module{d.Path, d.Version, d.Sum}
			usedBy[key] = append(usedBy[key], p)
		}
	}
	doc := spdx{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              "chartpin-" + version,
		DocumentNamespace: "https://github.com/chartpin/chartpin/releases/" + version + "/" + SBOMFile,
		CreationInfo:      spdxCreation{Created: created.UTC().Format(time.RFC3339), Creators: []string{"Tool: chartpin-dist"}},
	}
	root := spdxPackage{
		Name: mainPath, SPDXID: "SPDXRef-Package-chartpin", VersionInfo: version,
		DownloadLocation: "https://github.com/chartpin/chartpin",
		ExternalRefs:     []spdxRef{purl(mainPath, version)},
		Comment:          "binaries for " + strings.Join(platforms, ", "),
	}
	stdlib := spdxPackage{
		Name: "stdlib", SPDXID: "SPDXRef-Package-stdlib", VersionInfo: goVersion,
		DownloadLocation: "https://go.dev/dl/",
		ExternalRefs:     []spdxRef{purl("stdlib", goVersion)},
	}
	doc.Packages = []spdxPackage{root, stdlib}
	doc.Relationships = []spdxRelation{
		{"SPDXRef-DOCUMENT", "DESCRIBES", root.SPDXID},
		{root.SPDXID, "DEPENDS_ON", stdlib.SPDXID},
	}
	keys := make([]string, 0, len(modules))
	for k := range modules {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		m := modules[k]
		pkg := spdxPackage{
			Name:             m.path,
			SPDXID:           fmt.Sprintf("SPDXRef-Package-%d-%s", i+1, spdxIDUnsafe.ReplaceAllString(m.path, "-")),
			VersionInfo:      m.version,
			DownloadLocation: "https://proxy.golang.org/" + m.path + "/@v/" + m.version + ".zip",
			ExternalRefs:     []spdxRef{purl(m.path, m.version)},
		}
		if sum, ok := h1SHA256(m.sum); ok {
			// go.sum's h1: hash: SHA-256 over the module's file list and file hashes.
			pkg.Checksums = []spdxSum{{"SHA256", sum}}
			pkg.Comment = "checksum is the go.sum " + m.sum + " hash in hex"
		}
		if len(usedBy[k]) < len(platforms) {
			pkg.Comment = strings.TrimPrefix(pkg.Comment+"; only in "+strings.Join(usedBy[k], ", "), "; ")
		}
		doc.Packages = append(doc.Packages, pkg)
		doc.Relationships = append(doc.Relationships, spdxRelation{root.SPDXID, "DEPENDS_ON", pkg.SPDXID})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func purl(path, version string) spdxRef {
	return spdxRef{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + version}
}

// h1SHA256 turns a go.sum "h1:<base64>" hash into hex.
func h1SHA256(sum string) (string, bool) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha256.Size {
		return "", false
	}
	return hex.EncodeToString(raw), true
}
