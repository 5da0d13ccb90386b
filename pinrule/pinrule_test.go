package pinrule

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/yamledit"
)

func TestWhen(t *testing.T) {
	values := `a:
  on: true
  off: false
  str: "true"
  n: 3
  name: prod
  nul: null
  list: [1]
`
	f, err := yamledit.Parse("values.yaml", []byte(values))
	if err != nil {
		t.Fatal(err)
	}
	// The lookup pin evaluates conditions with.
	get := func(path string) (*yaml.Node, error) { return yamledit.LookupNode(f.Docs[0].Content[0], path) }
	cases := []struct {
		cond    string
		want    bool
		wantErr string
	}{
		{"a.on == true", true, ""},
		{"a.on", true, ""},
		{"!a.off", true, ""},
		{"a.off == true", false, ""},
		{"a.on != true", false, ""},
		{"a.n == 3", true, ""},
		{"a.name == prod", true, ""},
		{"a.name == 'prod' && a.on", true, ""},
		{"a.name == prod && a.off", false, ""},
		{"a.nul == null", true, ""},
		{"a.missing == true", false, "unreadable"},
		{"a.str == true", false, "not a boolean"},
		{"a.list == 1", false, "not a scalar"},
		{"a.name == 3", false, "not a number"},
	}
	for _, tc := range cases {
		c, err := ParseWhen(tc.cond)
		if err != nil {
			t.Fatalf("%s: %v", tc.cond, err)
		}
		got, err := c.Eval(get)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q (fail closed)", tc.cond, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s = %v, %v; want %v", tc.cond, got, err, tc.want)
		}
	}
}

// HighestInRange is the one range rule pin and drift share: strict semver
// (a float like 0.8 never counts), optional v, prereleases only when named.
func TestHighestInRange(t *testing.T) {
	cases := []struct {
		rng  string
		tags []string
		want string
	}{
		{">=0.8.0 <=0.8.4", []string{"0.8", "0.8.0", "0.8.9"}, "0.8.0"},
		{">=0.8.0 <=0.8.4", []string{"0.8", "0.8.0", "v0.8.3", "0.8.4-rc.1", "0.8.9", "latest"}, "v0.8.3"},
		{"~1.9.63-0", []string{"1.9.63-rc.1", "1.9.62"}, "1.9.63-rc.1"},
		{">=1.9.0", []string{"1.9.63-rc.1", "1.9.63", "1.9"}, "1.9.63"},
		{"1.x", []string{"v1.0.0", "1.0.0"}, "v1.0.0"},
		{"~0.8", []string{"latest", "0.8", "v0.8.2", "0.8.4", "0.8.8"}, "0.8.8"},
		{"<2", []string{"1.9.63-rc.1", "1.9.63", "1.9.62", "v1.10.0-rc.1"}, "1.9.63"},
		{">=1.10.0-rc.0", []string{"1.9.63", "v1.10.0-rc.1"}, "v1.10.0-rc.1"},
	}
	for _, c := range cases {
		got, err := HighestInRange(c.rng, c.tags)
		if err != nil || got != c.want {
			t.Errorf("HighestInRange(%q, %q) = %q, %v; want %q", c.rng, c.tags, got, err, c.want)
		}
	}
	if _, err := HighestInRange(">=0.8.0 <=0.8.4", []string{"0.8", "0.9.0"}); err == nil || !strings.Contains(err.Error(), "no tag in versions range") {
		t.Errorf("only a float in range: err %v", err)
	}
	if _, err := HighestInRange("not a range", nil); err == nil {
		t.Error("bad range accepted")
	}
}

// FollowStep takes the entry with the follower's pin key when a path is
// configured twice; FollowRoot walks a chain to its end and stops a loop.
func TestFollow(t *testing.T) {
	imgs := []Link{
		{At: "a", Pin: "prodDigest"},
		{At: "a", Pin: "stgDigest"},
		{At: "b", Pin: "stgDigest", Follows: "a"},
		{At: "c", Pin: "stgDigest", Follows: "b"},
		{At: "d", Pin: "other", Follows: "a"},
	}
	self := func(l Link) Link { return l }
	if got, err := FollowStep(imgs, self, imgs[2]); err != nil || got.Pin != "stgDigest" {
		t.Errorf("FollowStep(b) = %+v, %v; want a with stgDigest", got, err)
	}
	if got, err := FollowRoot(imgs, self, imgs[3]); err != nil || got.At != "a" || got.Pin != "stgDigest" {
		t.Errorf("FollowRoot(c) = %+v, %v; want a with stgDigest", got, err)
	}
	if _, err := FollowRoot(imgs, self, imgs[4]); err == nil || !strings.Contains(err.Error(), "none uses \"other\"") {
		t.Errorf("FollowRoot(d): %v; want an ambiguity error", err)
	}
	loop := []Link{{At: "x", Follows: "y"}, {At: "y", Follows: "x"}}
	if _, err := FollowRoot(loop, self, loop[0]); err == nil || !strings.Contains(err.Error(), "loops") {
		t.Errorf("loop: %v", err)
	}
}
