package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A registry that never answers: --timeout ends the run, and the message
// names --timeout and how to raise it (exit 1, an operation failure), in
// text and in the JSON error object.
func TestTimeoutNamesTheFlag(t *testing.T) {
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // the client gives up; the server never answers
	}))
	t.Cleanup(hung.Close)
	host := strings.TrimPrefix(hung.URL, "http://")
	ref := host + "/team/app:1.0"

	_, errOut, code := runCLI(t, "resolve", ref, "--insecure-registry", host, "--timeout", "1s")
	if code != 1 {
		t.Errorf("exit %d, want 1: %s", code, errOut)
	}
	for _, want := range []string{"--timeout 1s ran out", "raise it, e.g. --timeout 2s"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}

	stdout, _, code := runCLI(t, "resolve", ref, "--insecure-registry", host, "--timeout", "1s", "-o", "json")
	var doc struct {
		Error errorJSON `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != 1 || doc.Error.Class != "failure" || doc.Error.ExitCode != 1 ||
		!strings.Contains(doc.Error.Message, "--timeout 1s ran out") {
		t.Errorf("json: exit %d, %v, %+v\n%s", code, err, doc, stdout)
	}
}
