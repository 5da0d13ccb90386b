package guard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/guard"
	"github.com/chartpin/chartpin/guard/guardtest"
)

// No credential is ever printed, logged or written: an --index URL's
// password, or a user name alone (a token), appears in no finding, error,
// JSON result or log line.
func TestIndexURLCredentialsAreNeverShown(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		seen = append(seen, user+":"+pass)
		switch {
		case user+":"+pass != "ci:s3cretpass" && user+":"+pass != "t0kensecret:":
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case r.URL.Path == "/broken/index.yaml":
			fmt.Fprint(w, "{not: [yaml")
		default:
			fmt.Fprint(w, "apiVersion: v1\nentries:\n  a:\n    - version: 1.1.0\n")
		}
	}))
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	with := func(userinfo, base, path string) string {
		return strings.Replace(base, "http://", "http://"+userinfo+"@", 1) + path
	}
	r := guardtest.New(t)
	r.Chart("charts/a", "a", "1.0.0", "1.0.0")
	r.Base()
	r.Write("charts/a/values.yaml", "x: 1\n")
	r.ChartYAML("charts/a", "a", "1.1.0", "1.1.0")
	r.Commit("bump a to a published version")
	for _, tc := range []struct {
		name, index, shown, secret string
		finding                    bool
	}{
		{"published, password", with("ci:s3cretpass", srv.URL, "/index.yaml"), "ci:xxxxx@", "s3cretpass", true},
		{"published, token as user", with("t0kensecret", srv.URL, "/index.yaml"), "xxxxx@", "t0kensecret", true},
		{"refused", with("ci:wr0ngsecret", srv.URL, "/index.yaml"), "ci:xxxxx@", "wr0ngsecret", false},
		{"not an index", with("ci:s3cretpass", srv.URL, "/broken/index.yaml"), "ci:xxxxx@", "s3cretpass", false},
		{"unreachable, token as user", with("t0kensecret", closed, "/index.yaml"), "", "t0kensecret", false},
		{"unparseable, password", with("ci:s3cretpass", closed, ":bad/index.yaml"), "", "s3cretpass", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			res, err := guard.Check(context.Background(), r.Dir, guard.Options{Base: "origin/main", Index: tc.index,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			shown := logs.String()
			switch {
			case tc.finding && err != nil:
				t.Fatal(err)
			case tc.finding:
				data, _ := json.Marshal(res)
				shown += "\n" + string(data) + "\n" + res.Err().Error()
				var msgs []string
				for _, f := range res.Findings() {
					msgs = append(msgs, f.Message)
				}
				if m := strings.Join(msgs, "\n"); !strings.Contains(m, "already published in http://"+tc.shown) {
					t.Errorf("findings %q do not name the index as %s...", m, tc.shown)
				}
			case err == nil:
				t.Fatalf("no error; result %+v", res)
			default:
				shown += "\n" + err.Error()
				if !strings.Contains(err.Error(), tc.shown) {
					t.Errorf("error %v does not name the index as %s...", err, tc.shown)
				}
			}
			if strings.Contains(shown, tc.secret) {
				t.Errorf("the credential %q is shown:\n%s", tc.secret, shown)
			}
		})
	}
	if len(seen) == 0 || seen[0] != "ci:s3cretpass" {
		t.Errorf("the index server saw basic auth %v, want the URL's credentials sent", seen)
	}
}
