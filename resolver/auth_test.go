package resolver_test

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/chartpin/chartpin/resolver"
)

func TestRegistryAuthKeychain(t *testing.T) {
	fallback := resolver.StaticKeychain("from-docker-config", "x")
	for _, c := range []struct {
		value string
		// what each registry is offered: user name, "" for the fallback's
		private, hub string
	}{
		{"ci:pa:ss", "ci", "ci"},                                     // every registry
		{"ci.bot:pa=ss", "ci.bot", "ci.bot"},                         // '=' in a password is not a host
		{"ci.bot:1234=x", "ci.bot", "ci.bot"},                        // nor is user:port-like=…
		{"reg.example:5000=ci:s3=cr:et", "ci", "from-docker-config"}, // one host only
		{"docker.io=hub:tok", "from-docker-config", "hub"},           // docker.io names index.docker.io
	} {
		kc, err := resolver.RegistryAuthKeychain(c.value, fallback)
		if err != nil {
			t.Fatalf("%q: %v", c.value, err)
		}
		for reg, want := range map[string]string{"reg.example:5000": c.private, name.DefaultRegistry: c.hub} {
			r, _ := name.NewRegistry(reg)
			a, err := kc.Resolve(r)
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := authn.Authorization(t.Context(), a)
			if cfg.Username != want {
				t.Errorf("%q: %s is offered user %q, want %q", c.value, reg, cfg.Username, want)
			}
		}
	}
	for _, bad := range []string{"secret-without-colon", "host.example=nocolon-secret", ":pw", "reg.example=:pw",
		// A scope that is no host is refused, never turned into credentials for every registry.
		"https://reg.example:5000=ci:secret", "reg.example/org=ci:secret", "myreg=ci:secret", "reg.example = ci:secret", "ghcr.io =ci:pw"} {
		_, err := resolver.RegistryAuthKeychain(bad, fallback)
		if err == nil || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "pw") {
			t.Errorf("%q: err = %v, want an error that does not repeat the value", bad, err)
		}
	}
}
