// Package pullrequest opens or updates the one pull request a release branch
// has. Ensure is idempotent: when the open pull request already says what it
// should, it makes no call that edits anything.
package pullrequest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/redact"
	"github.com/google/go-github/v60/github"
)

// PR is an open pull request.
type PR struct {
	Number int      `json:"number"`
	URL    string   `json:"url"`
	Title  string   `json:"title"`
	Body   string   `json:"body"`
	Base   string   `json:"base"`
	Head   string   `json:"head"`
	Labels []string `json:"labels,omitempty"`
}

// NewPR is what Create sends.
type NewPR struct {
	Head, Base, Title, Body string
}

// Service is the GitHub surface the release flow needs; GitHub implements it.
type Service interface {
	// FindOpen returns the open pull request whose head is branch, or nil.
	FindOpen(ctx context.Context, branch string) (*PR, error)
	// Create opens a pull request.
	Create(ctx context.Context, pr NewPR) (*PR, error)
	// Edit sets the title, body and base of pull request number.
	Edit(ctx context.Context, number int, title, body, base string) (*PR, error)
	// AddLabels adds labels to pull request number.
	AddLabels(ctx context.Context, number int, labels []string) error
}

// Request is the pull request the release wants to exist.
type Request struct {
	Head, Base, Title, Body string
	Labels                  []string
}

// Action says what Ensure did.
type Action string

// Actions Ensure reports.
const (
	Created   Action = "created"
	Updated   Action = "updated"
	Unchanged Action = "unchanged"
)

// Outcome is the result of Ensure.
type Outcome struct {
	Action      Action   `json:"action"`
	PR          PR       `json:"pr"`
	LabelsAdded []string `json:"labels_added,omitempty"`
}

// Ensure finds the open pull request for req.Head and creates it, or updates
// its title, body and base when they differ, then adds missing labels.
func Ensure(ctx context.Context, s Service, req Request) (Outcome, error) {
	var out Outcome
	pr, err := s.FindOpen(ctx, req.Head)
	if err != nil {
		return out, err
	}
	switch {
	case pr == nil:
		pr, err = s.Create(ctx, NewPR{Head: req.Head, Base: req.Base, Title: req.Title, Body: req.Body})
		out.Action = Created
	case pr.Title != req.Title || normalize(pr.Body) != normalize(req.Body) || pr.Base != req.Base:
		labels := pr.Labels
		pr, err = s.Edit(ctx, pr.Number, req.Title, req.Body, req.Base)
		if pr != nil && len(pr.Labels) == 0 {
			pr.Labels = labels
		}
		out.Action = Updated
	default:
		out.Action = Unchanged
	}
	if err != nil {
		return out, err
	}
	out.PR = *pr
	var missing []string
	for _, l := range req.Labels {
		if !slices.Contains(pr.Labels, l) && !slices.Contains(missing, l) {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		if err := s.AddLabels(ctx, pr.Number, missing); err != nil {
			return out, err
		}
		out.LabelsAdded = missing
		out.PR.Labels = append(out.PR.Labels, missing...)
	}
	return out, nil
}

// normalize ignores the CRLF GitHub may store for a body edited in the web UI.
func normalize(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
}

// GitHub is Service over the GitHub REST API (go-github).
type GitHub struct {
	client      *github.Client
	owner, repo string
	timeout     time.Duration
	log         *slog.Logger
}

// Options configures NewGitHub; the zero value talks to api.github.com.
type Options struct {
	// API is the REST API base URL (default https://api.github.com/).
	API string
	// HTTPClient is copied and wrapped so the token reaches only API's host.
	HTTPClient *http.Client
	// Timeout bounds each API call (default 30s).
	Timeout time.Duration
	// Logger receives progress (default: discard).
	Logger *slog.Logger
}

// Validate checks the options by themselves, before any request: API must
// be HTTPS, or HTTP on this machine, so the token never travels in cleartext.
func (o Options) Validate() error {
	_, err := o.base()
	return err
}

func (o Options) base() (*url.URL, error) {
	api := cmp.Or(o.API, "https://api.github.com/")
	base, err := url.Parse(strings.TrimRight(api, "/") + "/")
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") {
		return nil, failure.Input(failure.Optionf("{{API}} %q: want an http(s) URL such as https://api.github.com", redact.URL(api)))
	}
	if !redact.Private(base.String()) {
		return nil, failure.Input(failure.Optionf("{{API}} %s: plain HTTP to another machine would carry GITHUB_TOKEN in cleartext; use https://", redact.URL(api)))
	}
	return base, nil
}

// NewGitHub returns a Service for owner/repo authenticated with token.
func NewGitHub(owner, repo, token string, o Options) (*GitHub, error) {
	if owner == "" || repo == "" {
		return nil, fmt.Errorf("github repository %q/%q: want OWNER/NAME", owner, repo)
	}
	if token == "" {
		return nil, fmt.Errorf("no GitHub token: set GITHUB_TOKEN (pull-requests: write)")
	}
	base, err := o.base()
	if err != nil {
		return nil, err
	}
	hc := &http.Client{}
	if o.HTTPClient != nil {
		*hc = *o.HTTPClient
	}
	hc.Transport = tokenGuard{host: base.Host, next: hc.Transport}
	c := github.NewClient(hc).WithAuthToken(token)
	c.BaseURL = base
	return &GitHub{client: c, owner: owner, repo: repo, timeout: cmp.Or(o.Timeout, 30*time.Second),
		log: cmp.Or(o.Logger, slog.New(slog.DiscardHandler))}, nil
}

// tokenGuard passes only requests to the API's own host over HTTPS or
// loopback: go-github sets the token on every request, redirects included.
type tokenGuard struct {
	host string
	next http.RoundTripper
}

func (g tokenGuard) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.EqualFold(r.URL.Host, g.host) || !redact.Private(r.URL.String()) {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, failure.Optionf("refusing to send GITHUB_TOKEN to %s: only the {{API}} host %s, over HTTPS or on this machine", redact.URL(r.URL.String()), g.host)
	}
	next := g.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// FindOpen implements Service.
func (g *GitHub) FindOpen(ctx context.Context, branch string) (*PR, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	prs, _, err := g.client.PullRequests.List(ctx, g.owner, g.repo, &github.PullRequestListOptions{
		State: "open", Head: g.owner + ":" + branch, ListOptions: github.ListOptions{PerPage: 10},
	})
	if err != nil {
		return nil, g.wrap("listing open pull requests for "+branch, err)
	}
	for _, p := range prs {
		// A fork's branch of the same name must not be taken for ours.
		if p.GetHead().GetRef() != branch {
			continue
		}
		if r := p.GetHead().GetRepo(); r != nil && !strings.EqualFold(r.GetFullName(), g.owner+"/"+g.repo) {
			continue
		}
		g.log.Debug("found pull request", "number", p.GetNumber(), "branch", branch)
		return convert(p), nil
	}
	return nil, nil
}

// Create implements Service.
func (g *GitHub) Create(ctx context.Context, n NewPR) (*PR, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	p, _, err := g.client.PullRequests.Create(ctx, g.owner, g.repo, &github.NewPullRequest{
		Title: &n.Title, Head: &n.Head, Base: &n.Base, Body: &n.Body, MaintainerCanModify: github.Bool(true),
	})
	if err != nil {
		return nil, g.wrap(fmt.Sprintf("opening a pull request %s → %s", n.Head, n.Base), err)
	}
	g.log.Debug("created pull request", "number", p.GetNumber())
	return convert(p), nil
}

// Edit implements Service.
func (g *GitHub) Edit(ctx context.Context, number int, title, body, base string) (*PR, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	p, _, err := g.client.PullRequests.Edit(ctx, g.owner, g.repo, number, &github.PullRequest{
		Title: &title, Body: &body, Base: &github.PullRequestBranch{Ref: &base},
	})
	if err != nil {
		return nil, g.wrap(fmt.Sprintf("updating pull request #%d", number), err)
	}
	return convert(p), nil
}

// AddLabels implements Service.
func (g *GitHub) AddLabels(ctx context.Context, number int, labels []string) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if _, _, err := g.client.Issues.AddLabelsToIssue(ctx, g.owner, g.repo, number, labels); err != nil {
		return g.wrap(fmt.Sprintf("labelling pull request #%d with %s", number, strings.Join(labels, ", ")), err)
	}
	return nil
}

func convert(p *github.PullRequest) *PR {
	out := &PR{Number: p.GetNumber(), URL: p.GetHTMLURL(), Title: p.GetTitle(), Body: p.GetBody(),
		Base: p.GetBase().GetRef(), Head: p.GetHead().GetRef()}
	for _, l := range p.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out
}

// wrap turns a go-github error into one that says what to do next.
func (g *GitHub) wrap(what string, err error) error {
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s in %s/%s: %w; GitHub did not answer in time, re-run (release is idempotent)", what, g.owner, g.repo, err)
		}
		return failure.Optionf("%s in %s/%s: %w; check {{API}} and the network, then re-run", what, g.owner, g.repo, err)
	}
	detail := er.Message
	for _, e := range er.Errors {
		if e.Message != "" {
			detail += ": " + e.Message
		} else if e.Code != "" {
			detail += fmt.Sprintf(": %s %s", e.Field, e.Code)
		}
	}
	code := er.Response.StatusCode
	var next string
	switch {
	case code == http.StatusUnauthorized:
		next = "GITHUB_TOKEN was refused: set a valid token"
	case code == http.StatusForbidden:
		next = "the token lacks permission: the job needs pull-requests: write (and contents: write to push)"
	case code == http.StatusNotFound:
		next = "check {{Repo}} and that the token can see the repository"
	case code == http.StatusUnprocessableEntity:
		next = "GitHub rejected the request: check that {{Base}} exists and the branch was pushed"
	case code >= 500:
		next = "GitHub had a server error: re-run (release is idempotent and completes the job)"
	default:
		next = "re-run after fixing the cause"
	}
	return failure.Optionf("%s in %s/%s: GitHub answered %d %s; "+next+": %w", what, g.owner, g.repo, code, detail, ErrAPI)
}

// ErrAPI marks an error answer from the GitHub API.
var ErrAPI = errors.New("github api error")

var remoteRE = regexp.MustCompile(`^(?:https?://(?:[^@/]+@)?[^/]+/|ssh://(?:[^@/]+@)?[^/]+/|[^@/:]+@[^:]+:)([^/]+)/([^/]+?)(?:\.git)?/?$`)

// RepoFromRemote derives OWNER and NAME from a git remote URL
// (https://github.com/o/r.git, git@github.com:o/r.git, ssh://git@github.com/o/r).
func RepoFromRemote(remote string) (owner, name string, err error) {
	m := remoteRE.FindStringSubmatch(remote)
	if m == nil {
		return "", "", fmt.Errorf("cannot derive OWNER/NAME from remote URL %q", redact.URL(remote))
	}
	return m[1], m[2], nil
}
