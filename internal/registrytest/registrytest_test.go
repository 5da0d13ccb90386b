package registrytest

import (
	"net/http"
	"testing"
)

func TestDistributionWithAuthRefusesAnonymous(t *testing.T) {
	d := StartDistribution(t, DistributionOptions{Htpasswd: map[string]string{"u": "p"}})
	d.PushImage(t, "x", "1") // with the user's credentials
	resp, err := http.Get("http://" + d.Host + "/v2/x/tags/list")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous tag list: %s, want 401", resp.Status)
	}
}

func TestDistributionWithTLSServesOnlyHTTPS(t *testing.T) {
	d := StartDistribution(t, DistributionOptions{Htpasswd: map[string]string{"u": "p"}, TLS: true})
	d.PushImage(t, "x", "1") // over HTTPS, trusting d.CA
	client := &http.Client{Transport: d.Transport}
	resp, err := client.Get("https://" + d.Host + "/v2/x/tags/list")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous tag list over HTTPS: %s, want 401", resp.Status)
	}
	if _, err := http.Get("https://" + d.Host + "/v2/"); err == nil {
		t.Error("a client without d.CA trusted the self-signed certificate")
	}
	if resp, err := http.Get("http://" + d.Host + "/v2/"); err == nil && resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP answered %s", resp.Status)
	}
}

func TestProxyCountsAndInjects(t *testing.T) {
	reg := New(t)
	p := NewProxy(t, reg.Host)
	p.Inject(func(n int, _ *http.Request) Fault {
		if n == 2 {
			return Fault{Status: http.StatusTeapot}
		}
		return Fault{}
	})
	for _, want := range []int{http.StatusOK, http.StatusTeapot, http.StatusOK} {
		resp, err := http.Get("http://" + p.Host + "/v2/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("status %d, want %d", resp.StatusCode, want)
		}
	}
	if p.Count("GET") != 3 || reg.Count("GET") != 2 {
		t.Errorf("proxy saw %d, registry %d; want 3 and 2", p.Count("GET"), reg.Count("GET"))
	}
}
