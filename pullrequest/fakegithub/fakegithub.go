// Package fakegithub is an httptest server speaking the GitHub REST endpoints
// chartpin calls (list pull requests by head, create, edit, add labels). It
// keeps pull requests in memory, checks the bearer token, records every
// request, and can be told to fail the next matching call.
package fakegithub

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Call is one request the server received.
type Call struct {
	Method string
	Path   string
	Query  string
	Body   string
	Auth   string // the Authorization header
}

// String is "METHOD /path?query".
func (c Call) String() string {
	if c.Query == "" {
		return c.Method + " " + c.Path
	}
	return c.Method + " " + c.Path + "?" + c.Query
}

// PR is a pull request as the fake stores it.
type PR struct {
	Number     int
	Title      string
	Body       string
	Head, Base string
	State      string
	Labels     []string
}

type fault struct {
	method string
	path   *regexp.Regexp
	status int
	body   string
}

// Server is the fake GitHub API.
type Server struct {
	*httptest.Server
	Owner, Repo, Token string
	// Branches, when set, decides whether a head branch exists (422 otherwise).
	Branches func(name string) bool

	mu     sync.Mutex
	calls  []Call
	prs    []*PR
	faults []fault
}

// New starts a fake for owner/repo that accepts token.
func New(owner, repo, token string) *Server {
	s := &Server{Owner: owner, Repo: repo, Token: token}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// NewAt is New listening on addr (e.g. a non-loopback IP and port 0), for
// tests of where a token may travel in cleartext.
func NewAt(addr, owner, repo, token string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{Owner: owner, Repo: repo, Token: token}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Server.Listener.Close()
	s.Server.Listener = l
	s.Server.Start()
	return s, nil
}

// NonLoopbackIP is an IPv4 address of this machine that is not loopback.
func NonLoopbackIP() (string, bool) {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String(), true
		}
	}
	return "", false
}

// Calls returns every request so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Sequence returns every request so far as "METHOD /path?query" strings.
func (s *Server) Sequence() []string {
	var out []string
	for _, c := range s.Calls() {
		out = append(out, c.String())
	}
	return out
}

// Reset forgets the recorded calls (not the pull requests).
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// PRs returns a copy of the stored pull requests.
func (s *Server) PRs() []PR {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PR
	for _, p := range s.prs {
		c := *p
		c.Labels = append([]string(nil), p.Labels...)
		out = append(out, c)
	}
	return out
}

// ClosePR marks pull request number closed (as a merge would).
func (s *Server) ClosePR(number int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.prs {
		if p.Number == number {
			p.State = "closed"
		}
	}
}

// FailNext makes the next request matching method and the path regexp
// answer status with a GitHub-style JSON body carrying message.
func (s *Server) FailNext(method, pathRE string, status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{method, regexp.MustCompile(pathRE), status, body})
}

var (
	pullsRE  = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/pulls$`)
	pullRE   = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/pulls/(\d+)$`)
	labelsRE = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/issues/(\d+)/labels$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body), Auth: r.Header.Get("Authorization")})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	for i, f := range s.faults {
		if f.method == r.Method && f.path.MatchString(r.URL.Path) {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			w.WriteHeader(f.status)
			io.WriteString(w, f.body)
			return
		}
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Token {
		s.fail(w, http.StatusUnauthorized, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`)
		return
	}
	switch {
	case pullsRE.MatchString(r.URL.Path) && r.Method == http.MethodGet:
		if !s.ours(pullsRE, r.URL.Path, w) {
			return
		}
		q := r.URL.Query()
		var out []any
		for _, p := range s.prs {
			if st := q.Get("state"); st != "" && st != "all" && p.State != st {
				continue
			}
			if h := q.Get("head"); h != "" && h != s.Owner+":"+p.Head {
				continue
			}
			if b := q.Get("base"); b != "" && b != p.Base {
				continue
			}
			out = append(out, s.render(p))
		}
		if out == nil {
			out = []any{}
		}
		json.NewEncoder(w).Encode(out)
	case pullsRE.MatchString(r.URL.Path) && r.Method == http.MethodPost:
		if !s.ours(pullsRE, r.URL.Path, w) {
			return
		}
		var in struct{ Title, Head, Base, Body string }
		if err := json.Unmarshal(body, &in); err != nil || in.Title == "" || in.Head == "" || in.Base == "" {
			s.fail(w, http.StatusUnprocessableEntity, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"missing_field","field":"title"}]}`)
			return
		}
		for _, p := range s.prs {
			if p.State == "open" && p.Head == in.Head {
				s.fail(w, http.StatusUnprocessableEntity, fmt.Sprintf(`{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for %s:%s."}]}`, s.Owner, in.Head))
				return
			}
		}
		if s.Branches != nil && !s.Branches(in.Head) {
			s.fail(w, http.StatusUnprocessableEntity, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","field":"head","code":"invalid"}]}`)
			return
		}
		p := &PR{Number: len(s.prs) + 1, Title: in.Title, Body: in.Body, Head: in.Head, Base: in.Base, State: "open"}
		s.prs = append(s.prs, p)
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(s.render(p))
	case pullRE.MatchString(r.URL.Path) && r.Method == http.MethodPatch:
		if !s.ours(pullRE, r.URL.Path, w) {
			return
		}
		p := s.find(pullRE, r.URL.Path)
		if p == nil {
			s.fail(w, http.StatusNotFound, `{"message":"Not Found"}`)
			return
		}
		var in struct {
			Title, Body *string
			Base        *string
		}
		if err := json.Unmarshal(body, &in); err != nil {
			s.fail(w, http.StatusBadRequest, `{"message":"Problems parsing JSON"}`)
			return
		}
		if in.Title != nil {
			p.Title = *in.Title
		}
		if in.Body != nil {
			p.Body = *in.Body
		}
		if in.Base != nil {
			p.Base = *in.Base
		}
		json.NewEncoder(w).Encode(s.render(p))
	case labelsRE.MatchString(r.URL.Path) && r.Method == http.MethodPost:
		if !s.ours(labelsRE, r.URL.Path, w) {
			return
		}
		p := s.find(labelsRE, r.URL.Path)
		if p == nil {
			s.fail(w, http.StatusNotFound, `{"message":"Not Found"}`)
			return
		}
		var labels []string
		if err := json.Unmarshal(body, &labels); err != nil {
			var obj struct{ Labels []string }
			if err := json.Unmarshal(body, &obj); err != nil {
				s.fail(w, http.StatusBadRequest, `{"message":"Problems parsing JSON"}`)
				return
			}
			labels = obj.Labels
		}
		for _, l := range labels {
			if !contains(p.Labels, l) {
				p.Labels = append(p.Labels, l)
			}
		}
		var out []any
		for _, l := range p.Labels {
			out = append(out, map[string]any{"name": l})
		}
		json.NewEncoder(w).Encode(out)
	default:
		s.fail(w, http.StatusNotFound, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)
	}
}

func (s *Server) ours(re *regexp.Regexp, path string, w http.ResponseWriter) bool {
	m := re.FindStringSubmatch(path)
	if m[1] != s.Owner || m[2] != s.Repo {
		s.fail(w, http.StatusNotFound, `{"message":"Not Found"}`)
		return false
	}
	return true
}

func (s *Server) find(re *regexp.Regexp, path string) *PR {
	n, _ := strconv.Atoi(re.FindStringSubmatch(path)[3])
	for _, p := range s.prs {
		if p.Number == n {
			return p
		}
	}
	return nil
}

func (s *Server) fail(w http.ResponseWriter, status int, body string) {
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func (s *Server) render(p *PR) map[string]any {
	labels := []any{}
	for _, l := range p.Labels {
		labels = append(labels, map[string]any{"name": l})
	}
	full := s.Owner + "/" + s.Repo
	return map[string]any{
		"number":   p.Number,
		"state":    p.State,
		"title":    p.Title,
		"body":     p.Body,
		"html_url": fmt.Sprintf("https://github.com/%s/pull/%d", full, p.Number),
		"head":     map[string]any{"ref": p.Head, "label": s.Owner + ":" + p.Head, "repo": map[string]any{"full_name": full}},
		"base":     map[string]any{"ref": p.Base, "repo": map[string]any{"full_name": full}},
		"labels":   labels,
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
