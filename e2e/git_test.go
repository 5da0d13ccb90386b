package e2e

import (
	"encoding/base64"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
)

// gitServer serves the bare repositories under root through git
// http-backend (smart HTTP) on loopback, checking the token as GitHub does
// (basic auth, any user), and records every request.
//
// TODO(lead): release/release_test.go has the same server inside newWorld;
// both should use one helper in an importable internal/gittest package.
type gitServer struct {
	*httptest.Server
	root string

	mu       sync.Mutex
	requests []string
}

func startGitServer(t *testing.T, root, token string) *gitServer {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	registrytest.RequireBinary(t, "git", "git")
	registrytest.RequireBinary(t, backend, "git")
	g := &gitServer{root: root}
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.requests = append(g.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		g.mu.Unlock()
		if _, pass, ok := r.BasicAuth(); !ok || pass != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "bad credentials", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(g.Close)
	return g
}

// reset forgets the recorded requests and returns them.
func (g *gitServer) reset() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.requests
	g.requests = nil
	return out
}

// seen returns the requests recorded so far.
func (g *gitServer) seen() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.requests...)
}

// hasBranch reports whether the bare repository has the branch.
func hasBranch(bare, branch string) bool {
	return exec.Command("git", "-C", bare, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Run() == nil
}

// pushes counts receive-pack POSTs: the requests that change the remote.
func pushes(requests []string) int {
	n := 0
	for _, r := range requests {
		if strings.HasPrefix(r, "POST ") && strings.Contains(r, "git-receive-pack") {
			n++
		}
	}
	return n
}

// clone is a fresh CI checkout of the repository's main branch.
func (g *gitServer) clone(t *testing.T, repo, token, dir string) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
	git(t, filepath.Dir(dir), "-c", "http.extraHeader=Authorization: Basic "+auth, "clone", "-q", "--branch", "main", g.URL+"/"+repo, dir)
}

// git runs git in dir with a fixed identity and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Edge Dev", "-c", "user.email=dev@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
