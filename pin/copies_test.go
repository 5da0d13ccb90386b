package pin

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/resolver"
)

const (
	copyOld = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	copyNew = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// copyChart is a one-pin chart whose pin moves from copyOld to copyNew,
// plus extra files; it returns the dir and the offline resolver.
func copyChart(t *testing.T, values string, extra map[string]string) (string, resolver.Interface) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: copies\nversion: 1.0.0\n",
		"values.yaml": "image:\n  repository: example.org/team/app\n  tag: \"1.0\"\n  digest: " + copyOld + "\n" + values,
	}
	for k, v := range extra {
		files[k] = v
	}
	writeTree(t, dir, files)
	l, err := resolver.ParseLock("digests.yaml", []byte("example.org/team/app:1.0: {digest: "+copyNew+", platforms: [linux/amd64]}\n"+
		"example.org/team/app@"+copyOld+": {digest: "+copyOld+", platforms: [linux/amd64]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, resolver.NewOffline(l)
}

// A copy on a comment line of a non-values file
// (templates/NOTES.txt) is listed without --rewrite-copies and rewritten with it.
func TestCopiesOnCommentLines(t *testing.T) {
	notes := "Thanks for installing.\n# test: " + copyOld + "\n"
	tpl := "{{/* pinned: */}}\n  # image: example.org/team/app@" + copyOld + "\n"
	dir, r := copyChart(t, "", map[string]string{"templates/NOTES.txt": notes, "templates/deploy.yaml": tpl})
	before := hashTree(t, dir)

	_, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: r})
	if err == nil {
		t.Fatal("copies on comment lines not reported")
	}
	for _, want := range []string{
		filepath.Join(dir, "templates/NOTES.txt") + ":2: " + copyOld,
		filepath.Join(dir, "templates/deploy.yaml") + ":2: example.org/team/app@" + copyOld,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	sameHashes(t, before, hashTree(t, dir))

	res, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: r, RewriteCopies: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Apply(); err != nil {
		t.Fatal(err)
	}
	if got, want := read(t, filepath.Join(dir, "templates/NOTES.txt")), strings.Replace(notes, copyOld, copyNew, 1); got != want {
		t.Errorf("NOTES.txt:\n%s\nwant:\n%s", got, want)
	}
	if got, want := read(t, filepath.Join(dir, "templates/deploy.yaml")), strings.Replace(tpl, copyOld, copyNew, 1); got != want {
		t.Errorf("deploy.yaml:\n%s\nwant:\n%s", got, want)
	}
	var listed []string
	for _, cp := range res.Charts[0].Copies {
		listed = append(listed, relTo(dir, cp.File)+":"+strconv.Itoa(cp.Line)+" "+cp.Old+" -> "+cp.New)
	}
	want := "templates/NOTES.txt:2 " + copyOld + " -> " + copyNew + "\n" +
		"templates/deploy.yaml:2 example.org/team/app@" + copyOld + " -> example.org/team/app@" + copyNew
	if got := strings.Join(listed, "\n"); got != want {
		t.Errorf("copies:\n%s\nwant:\n%s", got, want)
	}
}

// values.yaml comments holding an old digest are listed with file:line and
// never edited, whether commented-out YAML, prose or a trailing comment;
// the run still fails without --rewrite-copies.
func TestCopiesInValuesComments(t *testing.T) {
	values := "# digest: " + copyOld + "\n" + // commented-out YAML
		"old:\n  # pinned by hand from " + copyOld + " in May\n" + // prose
		"  tag: \"1.0\"  # was " + copyOld + "\n" + // trailing comment
		"  note: \"# not a comment " + copyOld + "\"\n" // a scalar copy, rewritten
	dir, r := copyChart(t, values, nil)
	vpath := filepath.Join(dir, "values.yaml")
	orig := read(t, vpath)

	_, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: r})
	if err == nil {
		t.Fatal("values.yaml comment copies not reported")
	}
	for _, want := range []string{
		vpath + ":5: " + copyOld + " (old digest of image.digest): commented-out YAML in values.yaml: never rewritten",
		vpath + ":7: " + copyOld + " (old digest of image.digest): a comment in values.yaml: listed, never rewritten",
		vpath + ":8: " + copyOld + " (old digest of image.digest): a comment in values.yaml",
		vpath + ":9: " + copyOld + " (old digest of image.digest)\n",
		"(RewriteCopies lists values.yaml comments but never edits them)",
	} {
		if !strings.Contains(err.Error()+"\n", want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	res, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: r, RewriteCopies: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Apply(); err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(orig, "digest: "+copyOld+"\n", "digest: "+copyNew+"\n", 1) // the pin (line 4)
	want = strings.Replace(want, "# not a comment "+copyOld, "# not a comment "+copyNew, 1)
	if got := read(t, vpath); got != want {
		t.Errorf("values.yaml:\n%s\nwant:\n%s", got, want)
	}
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	txt := res.Text()
	os.Chdir(wd)
	for _, want := range []string{
		"  LEFT    values.yaml:5 " + copyOld + " (a values.yaml comment or a linked file, never rewritten: update it by hand)\n",
		"  LEFT    values.yaml:7 " + copyOld + " (",
		"  LEFT    values.yaml:8 " + copyOld + " (",
		"  copy    values.yaml:9 " + copyOld + " -> " + copyNew + "\n",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("text lacks %q:\n%s", want, txt)
		}
	}
	if md := res.Markdown(); !strings.Contains(md, "never rewritten; update them by hand):\n\n- `values.yaml:5`\n- `values.yaml:7`\n- `values.yaml:8`\n") {
		t.Errorf("markdown:\n%s", md)
	}
}

// A file that cannot be searched is an error naming it, never a silent skip.
func TestCopiesUnsearchableFiles(t *testing.T) {
	t.Run("larger than the search limit", func(t *testing.T) {
		big := strings.Repeat("x", maxCopyFile) + "\n" + copyOld + "\n"
		dir, r := copyChart(t, "", map[string]string{"files/big.txt": big})
		_, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: r, RewriteCopies: true})
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "files/big.txt")+" for copies of old digests: 8388681 bytes, larger than the 8 MiB searched") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("dangling link", func(t *testing.T) {
		dir, r := copyChart(t, "", nil)
		if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		_, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: r, RewriteCopies: true})
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "link")+": stat ") || !strings.Contains(err.Error(), "fix or remove the link") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("link to a file is searched, listed, never written through", func(t *testing.T) {
		outside := filepath.Join(t.TempDir(), "shared.tpl")
		if err := os.WriteFile(outside, []byte("image: "+copyOld+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		dir, r := copyChart(t, "", nil)
		link := filepath.Join(dir, "templates", "shared.tpl")
		os.MkdirAll(filepath.Dir(link), 0o755)
		if err := os.Symlink(outside, link); err != nil {
			t.Fatal(err)
		}
		res, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: r, RewriteCopies: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Apply(); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("link replaced: %v %v", fi, err)
		}
		if got := read(t, outside); got != "image: "+copyOld+"\n" {
			t.Errorf("link target written: %s", got)
		}
		cps := res.Charts[0].Copies
		if len(cps) != 1 || cps[0].File != link || cps[0].Line != 1 || cps[0].New != "" {
			t.Errorf("copies %+v", cps)
		}
	})
}

func TestCommentedOutYAML(t *testing.T) {
	for text, want := range map[string]bool{
		"digest: " + copyOld:                          true,
		"tag: \"1.0@" + copyOld + "\"":                true,
		"- image: repo@" + copyOld:                    true,
		"prodDigest:":                                 true,
		"\"quoted.key\": x":                           true,
		"test: " + copyOld:                            true,
		"pinned by hand from " + copyOld:              false,
		"a literal copy is left alone: " + copyOld:    false,
		"was " + copyOld:                              false,
		"digest: [unclosed " + copyOld:                false,
		"-" + copyOld:                                 false,
		"https://example.org/x@" + copyOld + " (doc)": false,
	} {
		if got := commentedOutYAML(text); got != want {
			t.Errorf("commentedOutYAML(%q) = %v, want %v", text, got, want)
		}
	}
}
