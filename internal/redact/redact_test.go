package redact

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:s3cret@charts.example/repo":   "https://user:xxxxx@charts.example/repo",
		"https://ghp_token@charts.example/repo":     "https://xxxxx@charts.example/repo",
		"https://charts.example/repo":               "https://charts.example/repo",
		"git@github.com:acme/charts.git":            "git@github.com:acme/charts.git",
		"./index.yaml":                              "./index.yaml",
		"https://us%er:s3cret@charts.example/%zz/x": "https://xxxxx@charts.example/%zz/x",
		"https://u:p4ss@charts.example:bad/x":       "https://xxxxx@charts.example:bad/x", // unparseable
		"https://u:p@ss@charts.example/x?q=1#f":     "https://u:xxxxx@charts.example/x?q=1#f",
		"demo-1.1.0.tgz":                            "demo-1.1.0.tgz",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErr(t *testing.T) {
	// Before wrapping: fmt.Errorf fixes the message when it is called.
	err := fmt.Errorf("fetching the index: %w", Err(&url.Error{Op: "Get", URL: "https://u:s3cret@h/index.yaml", Err: errors.New("refused")}))
	if s := err.Error(); strings.Contains(s, "s3cret") || !strings.Contains(s, "https://u:xxxxx@h/index.yaml") {
		t.Errorf("Err = %q", s)
	}
	_, perr := os.ReadFile("ftp://u:s3cret@h/index.yaml")
	if s := fmt.Errorf("reading: %w", Err(perr)).Error(); strings.Contains(s, "s3cret") || !strings.Contains(s, "ftp://u:xxxxx@h/index.yaml") {
		t.Errorf("Err(PathError) = %q", s)
	}
	if Err(nil) != nil {
		t.Error("Err(nil) != nil")
	}
}
