package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chartpin/chartpin/internal/gittest"
)

// hasBranch reports whether the bare repository has the branch.
func hasBranch(bare, branch string) bool {
	return exec.Command("git", "-C", bare, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Run() == nil
}

// clone is a fresh CI checkout of the repository's main branch.
func clone(t *testing.T, g *gittest.Server, repo, token, dir string) {
	t.Helper()
	git(t, filepath.Dir(dir), "-c", "http.extraHeader=Authorization: "+gittest.BasicAuth(token), "clone", "-q", "--branch", "main", g.URL+"/"+repo, dir)
}

// git runs git in dir with a fixed identity and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return gittest.Git(t, dir, args...)
}
