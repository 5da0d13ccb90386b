package pullrequest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/pullrequest/fakegithub"
)

const token = "ghp_test-token-not-real"

func setup(t *testing.T) (*fakegithub.Server, *GitHub) {
	t.Helper()
	fake := fakegithub.New("acme", "charts", token)
	t.Cleanup(fake.Close)
	gh, err := NewGitHub("acme", "charts", token, Options{API: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	return fake, gh
}

var req = Request{Head: "chartpin/pins", Base: "main", Title: "chart app 1.0.1: pin ingestor", Body: "| image | tag |\n|---|---|\n", Labels: []string{"release", "chartpin"}}

const (
	list   = "GET /repos/acme/charts/pulls?head=acme%3Achartpin%2Fpins&per_page=10&state=open"
	create = "POST /repos/acme/charts/pulls"
	edit   = "PATCH /repos/acme/charts/pulls/1"
	label  = "POST /repos/acme/charts/issues/1/labels"
)

func TestEnsureSequences(t *testing.T) {
	fake, gh := setup(t)
	ctx := context.Background()

	// First run: nothing open → list, create, label.
	out, err := Ensure(ctx, gh, req)
	if err != nil {
		t.Fatal(err)
	}
	if out.Action != Created || out.PR.Number != 1 || out.PR.URL != "https://github.com/acme/charts/pull/1" {
		t.Fatalf("first run = %+v", out)
	}
	assertSeq(t, fake, list, create, label)
	if calls := fake.Calls(); calls[2].Body != "[\"release\",\"chartpin\"]\n" {
		t.Errorf("labels body = %q", calls[2].Body)
	}
	if calls := fake.Calls(); !strings.Contains(calls[1].Body, `"head":"chartpin/pins"`) || !strings.Contains(calls[1].Body, `"base":"main"`) {
		t.Errorf("create body = %s", calls[1].Body)
	}

	// Re-run with changes: list, edit; labels already there.
	fake.Reset()
	changed := req
	changed.Title, changed.Body = "chart app 1.0.2: pin ingestor", "new table"
	out, err = Ensure(ctx, gh, changed)
	if err != nil {
		t.Fatal(err)
	}
	if out.Action != Updated || len(out.LabelsAdded) != 0 {
		t.Fatalf("re-run with changes = %+v", out)
	}
	assertSeq(t, fake, list, edit)
	if p := fake.PRs()[0]; p.Title != changed.Title || p.Body != "new table" {
		t.Fatalf("stored PR = %+v", p)
	}

	// Re-run without changes: one read, nothing that edits.
	fake.Reset()
	out, err = Ensure(ctx, gh, changed)
	if err != nil || out.Action != Unchanged {
		t.Fatalf("unchanged re-run = %+v, %v", out, err)
	}
	assertSeq(t, fake, list)

	// A label removed by hand is added back, nothing else.
	fake.Reset()
	more := changed
	more.Labels = append(more.Labels, "auto")
	out, err = Ensure(ctx, gh, more)
	if err != nil || out.Action != Unchanged || !reflect.DeepEqual(out.LabelsAdded, []string{"auto"}) {
		t.Fatalf("label re-run = %+v, %v", out, err)
	}
	assertSeq(t, fake, list, label)

	// After the PR is merged (closed), the next release opens a new one.
	fake.ClosePR(1)
	fake.Reset()
	out, err = Ensure(ctx, gh, req)
	if err != nil || out.Action != Created || out.PR.Number != 2 {
		t.Fatalf("after merge = %+v, %v", out, err)
	}
	assertSeq(t, fake, list, create, "POST /repos/acme/charts/issues/2/labels")
}

func TestEnsureBaseChangeIsAnEdit(t *testing.T) {
	fake, gh := setup(t)
	ctx := context.Background()
	if _, err := Ensure(ctx, gh, req); err != nil {
		t.Fatal(err)
	}
	fake.Reset()
	r := req
	r.Base = "release-1.x"
	out, err := Ensure(ctx, gh, r)
	if err != nil || out.Action != Updated || fake.PRs()[0].Base != "release-1.x" {
		t.Fatalf("base change = %+v, %v, %+v", out, err, fake.PRs())
	}
	assertSeq(t, fake, list, edit)
}

func TestAPIErrors(t *testing.T) {
	cases := []struct {
		name   string
		inject func(*fakegithub.Server)
		token  string
		seq    []string
		want   []string
	}{
		{
			name: "422 pull request exists",
			inject: func(f *fakegithub.Server) {
				f.FailNext("POST", `/pulls$`, 422, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for acme:chartpin/pins."}]}`)
			},
			seq:  []string{list, create},
			want: []string{"opening a pull request chartpin/pins → main in acme/charts", "GitHub answered 422 Validation Failed: A pull request already exists for acme:chartpin/pins.", "check that Base exists"},
		},
		{
			name:  "401 bad token",
			token: "ghp_wrong-token",
			seq:   []string{list},
			want:  []string{"listing open pull requests for chartpin/pins in acme/charts", "GitHub answered 401 Bad credentials", "GITHUB_TOKEN was refused"},
		},
		{
			name: "403 token without pull-requests: write",
			inject: func(f *fakegithub.Server) {
				f.FailNext("POST", `/pulls$`, 403, `{"message":"Resource not accessible by integration"}`)
			},
			seq:  []string{list, create},
			want: []string{"GitHub answered 403 Resource not accessible by integration", "pull-requests: write"},
		},
		{
			name: "422 on edit",
			inject: func(f *fakegithub.Server) {
				f.FailNext("GET", `/pulls$`, 200, `[{"number":7,"state":"open","title":"old","body":"old","head":{"ref":"chartpin/pins","repo":{"full_name":"acme/charts"}},"base":{"ref":"main"}}]`)
				f.FailNext("PATCH", `/pulls/7$`, 422, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","field":"base","code":"invalid"}]}`)
			},
			seq:  []string{list, "PATCH /repos/acme/charts/pulls/7"},
			want: []string{"updating pull request #7", "GitHub answered 422 Validation Failed: base invalid"},
		},
		{
			name: "502 on list",
			inject: func(f *fakegithub.Server) {
				f.FailNext("GET", `/pulls$`, 502, `{"message":"Server Error"}`)
			},
			seq:  []string{list},
			want: []string{"GitHub answered 502 Server Error", "re-run (release is idempotent"},
		},
		{
			name: "503 on labels after create",
			inject: func(f *fakegithub.Server) {
				f.FailNext("POST", `/labels$`, 503, `{"message":"Service Unavailable"}`)
			},
			seq:  []string{list, create, label},
			want: []string{"labelling pull request #1 with release, chartpin", "GitHub answered 503 Service Unavailable"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake, gh := setup(t)
			if tc.token != "" {
				var err error
				gh, err = NewGitHub("acme", "charts", tc.token, Options{API: fake.URL})
				if err != nil {
					t.Fatal(err)
				}
			}
			if tc.inject != nil {
				tc.inject(fake)
			}
			_, err := Ensure(context.Background(), gh, req)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrAPI) {
				t.Errorf("error does not wrap ErrAPI: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "token-not-real") || strings.Contains(err.Error(), "wrong-token") {
				t.Errorf("error leaks the token: %v", err)
			}
			assertSeq(t, fake, tc.seq...)
		})
	}
}

func TestNewGitHubRefusesBadInput(t *testing.T) {
	for _, tc := range []struct{ owner, repo, token, api, want string }{
		{"", "r", "t", "", "want OWNER/NAME"},
		{"o", "r", "", "", "set GITHUB_TOKEN"},
		{"o", "r", "t", "ftp://x", "API \"ftp://x\": want an http(s) URL"},
	} {
		_, err := NewGitHub(tc.owner, tc.repo, tc.token, Options{API: tc.api})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewGitHub(%q,%q,%q,%q) = %v, want %q", tc.owner, tc.repo, tc.token, tc.api, err, tc.want)
		}
	}
}

func TestRepoFromRemote(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/acme/charts.git":                "acme/charts",
		"https://github.com/acme/charts":                    "acme/charts",
		"https://x-access-token:abc@github.com/acme/charts": "acme/charts",
		"git@github.com:acme/charts.git":                    "acme/charts",
		"ssh://git@github.com/acme/charts.git":              "acme/charts",
		"http://127.0.0.1:4321/acme/charts.git":             "acme/charts",
		"https://github.example.com/org-x/chart.repo.git":   "org-x/chart.repo",
	} {
		o, n, err := RepoFromRemote(in)
		if err != nil || o+"/"+n != want {
			t.Errorf("RepoFromRemote(%q) = %s/%s, %v; want %s", in, o, n, err, want)
		}
	}
	_, _, err := RepoFromRemote("https://user:s3cret@example.com/only-one")
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "cannot derive OWNER/NAME") {
		t.Errorf("bad remote: %v", err)
	}
}

func assertSeq(t *testing.T, fake *fakegithub.Server, want ...string) {
	t.Helper()
	got := fake.Sequence()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("calls:\n  got  %q\n  want %q", got, want)
	}
}

// go-github puts the token on every request, redirects included: a redirect
// off the API host, or to plain HTTP on another machine, is refused before
// the request leaves.
func TestTokenStaysWithTheAPIHost(t *testing.T) {
	ip, ok := fakegithub.NonLoopbackIP()
	if !ok {
		t.Skip("this machine has no non-loopback IPv4 address to serve the fake API on")
	}
	far, err := fakegithub.NewAt(ip+":0", "acme", "charts", token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(far.Close)
	near := fakegithub.New("acme", "charts", token)
	t.Cleanup(near.Close)
	for _, target := range []string{far.URL, near.URL} {
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		}))
		t.Cleanup(redirect.Close)
		gh, err := NewGitHub("acme", "charts", token, Options{API: redirect.URL})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gh.FindOpen(context.Background(), "chartpin/pins"); err == nil || !strings.Contains(err.Error(), "refusing to send GITHUB_TOKEN to "+target) {
			t.Errorf("redirect to %s: err = %v", target, err)
		}
	}
	if n := len(far.Calls()) + len(near.Calls()); n != 0 {
		t.Errorf("the redirect targets got %d requests: %v %v", n, far.Calls(), near.Calls())
	}
	if _, err := NewGitHub("acme", "charts", token, Options{API: far.URL}); err == nil || !strings.Contains(err.Error(), "cleartext") {
		t.Errorf("plain HTTP to %s accepted: %v", far.URL, err)
	}
	for _, ok := range []string{"https://api.github.com", "https://ghe.example/api/v3", near.URL, "http://localhost:8080"} {
		if _, err := NewGitHub("acme", "charts", token, Options{API: ok}); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
}
