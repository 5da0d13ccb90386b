package resolver

import (
	"errors"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// StaticKeychain answers every registry with one username and password
// (CHARTPIN_REGISTRY_AUTH). The secret never appears in an error or log.
func StaticKeychain(user, password string) authn.Keychain {
	return staticKeychain{authn.FromConfig(authn.AuthConfig{Username: user, Password: password})}
}

type staticKeychain struct{ auth authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.auth, nil }

// RegistryAuthKeychain reads CHARTPIN_REGISTRY_AUTH: `user:password` for
// every registry, or `HOST=user:password` for that registry only, with the
// Docker config keychain (fallback) answering every other one — so a
// private registry's password is never offered to Docker Hub. Errors never
// contain the value.
func RegistryAuthKeychain(value string, fallback authn.Keychain) (authn.Keychain, error) {
	if host, creds, ok := strings.Cut(value, "="); ok && strings.Contains(creds, ":") && isHost(host) {
		user, pass, _ := strings.Cut(creds, ":")
		if user == "" || pass == "" {
			return nil, errors.New("CHARTPIN_REGISTRY_AUTH: want HOST=user:password with both parts (the value is not shown)")
		}
		return hostKeychain{host: canonicalHost(host), auth: authn.FromConfig(authn.AuthConfig{Username: user, Password: pass}), next: fallback}, nil
	}
	user, pass, ok := strings.Cut(value, ":")
	if !ok || user == "" || pass == "" {
		return nil, errors.New("CHARTPIN_REGISTRY_AUTH: want user:password or HOST=user:password (the value is not shown)")
	}
	return StaticKeychain(user, pass), nil
}

// isHost accepts registry hosts like ghcr.io, localhost, 127.0.0.1:5000 —
// and not a username, which has no dot, or a port that is not a number.
func isHost(s string) bool {
	if s == "" || (!strings.ContainsAny(s, ".:") && s != "localhost") {
		return false
	}
	_, err := name.NewRegistry(s, name.StrictValidation)
	return err == nil
}

type hostKeychain struct {
	host string
	auth authn.Authenticator
	next authn.Keychain
}

func (k hostKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if canonicalHost(r.RegistryStr()) == k.host {
		return k.auth, nil
	}
	return k.next.Resolve(r)
}
