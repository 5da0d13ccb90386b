package upgrade

import (
	"context"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// credential is what kc holds for a repository host ("" user when anonymous).
func credential(kc authn.Keychain, host string) (authn.AuthConfig, error) {
	reg, err := name.NewRegistry(host, name.WeakValidation)
	if err != nil {
		return authn.AuthConfig{}, err
	}
	a, err := kc.Resolve(reg)
	if err != nil {
		return authn.AuthConfig{}, err
	}
	cfg, err := a.Authorization()
	if err != nil || cfg == nil {
		return authn.AuthConfig{}, err
	}
	return *cfg, nil
}

// orasCredential answers Helm's OCI client from kc, per registry host, so
// the OCI path reads the same credentials as the index path.
func orasCredential(kc authn.Keychain) auth.CredentialFunc {
	return func(_ context.Context, hostport string) (auth.Credential, error) {
		c, err := credential(kc, hostport)
		if err != nil {
			return auth.EmptyCredential, err
		}
		return auth.Credential{Username: c.Username, Password: c.Password, RefreshToken: c.IdentityToken, AccessToken: c.RegistryToken}, nil
	}
}

// basicAuth adds the index host's credentials to requests for exactly that
// host over HTTPS: an archive on another host, or a redirect there, gets none.
type basicAuth struct {
	host, user, password string
	next                 http.RoundTripper
}

func (b basicAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" || req.URL.Host != b.host || req.Header.Get("Authorization") != "" || req.URL.User != nil {
		return b.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.SetBasicAuth(b.user, b.password)
	return b.next.RoundTrip(req)
}
