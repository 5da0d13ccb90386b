// Package gittest serves bare git repositories over smart HTTP through the
// real `git http-backend`, on loopback, checking a token the way GitHub
// does (basic auth, any user, the token as password), and records every
// request so tests can assert what reached the remote.
package gittest

import (
	"encoding/base64"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/chartpin/chartpin/internal/testenv"
)

// Backend is where Debian's git package installs http-backend.
const Backend = "/usr/lib/git-core/git-http-backend"

// Server serves the bare repositories under Root at URL + "/<name>.git".
type Server struct {
	*httptest.Server
	Root string

	mu       sync.Mutex
	requests []string
}

// NewHTTP starts a server for the bare repositories under root that accepts
// only token. It skips loudly (fails under CHARTPIN_REQUIRE_INTEGRATION=1)
// when git is not installed.
func NewHTTP(t testing.TB, root, token string) *Server {
	t.Helper()
	testenv.RequireBinary(t, "git", "git")
	testenv.RequireBinary(t, Backend, "git")
	s := &Server{Root: root}
	h := &cgi.Handler{Path: Backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		s.mu.Unlock()
		if _, pass, ok := r.BasicAuth(); !ok || pass != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "bad credentials", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// Requests returns the requests seen so far, as "METHOD /path?query".
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// Reset forgets the requests seen so far and returns them.
func (s *Server) Reset() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.requests
	s.requests = nil
	return out
}

// Pushes counts receive-pack POSTs: the requests that change the remote.
func (s *Server) Pushes() int {
	n := 0
	for _, r := range s.Requests() {
		if strings.HasPrefix(r, "POST ") && strings.Contains(r, "git-receive-pack") {
			n++
		}
	}
	return n
}

// BasicAuth is the Authorization header value git clients send for token,
// for `git -c http.extraHeader=...`.
func BasicAuth(token string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
}

// HasBranch reports whether the repository at dir has the branch.
func HasBranch(dir, branch string) bool {
	return exec.Command("git", "-C", dir, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Run() == nil
}

// Git runs the real git in dir as Alice <alice@example.com>, with no global
// or system config, and returns its trimmed output; a failure fails the
// test. It skips loudly (fails under CHARTPIN_REQUIRE_INTEGRATION=1) when
// git is not installed.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	testenv.RequireBinary(t, "git", "git")
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=Alice", "GIT_AUTHOR_EMAIL=alice@example.com",
		"GIT_COMMITTER_NAME=Alice", "GIT_COMMITTER_EMAIL=alice@example.com",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
