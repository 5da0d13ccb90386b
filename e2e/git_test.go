package e2e

import (
	"path/filepath"
	"testing"

	"github.com/chartpin/chartpin/internal/gittest"
)

// clone is a fresh CI checkout of the repository's main branch.
func clone(t *testing.T, g *gittest.Server, repo, token, dir string) {
	t.Helper()
	gittest.Git(t, filepath.Dir(dir), "-c", "http.extraHeader=Authorization: "+gittest.BasicAuth(token), "clone", "-q", "--branch", "main", g.URL+"/"+repo, dir)
}
