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

// ParseRegistryAuth splits CHARTPIN_REGISTRY_AUTH: `user:password` (host
// "", every registry) or `HOST=user:password` (that registry only). Errors
// never contain the value.
func ParseRegistryAuth(value string) (host, user, password string, err error) {
	if h, creds, ok := strings.Cut(value, "="); ok && strings.Contains(creds, ":") && isHost(h) {
		user, password, _ = strings.Cut(creds, ":")
		if user == "" || password == "" {
			return "", "", "", errors.New("CHARTPIN_REGISTRY_AUTH: want HOST=user:password with both parts (the value is not shown)")
		}
		return canonicalHost(h), user, password, nil
	}
	user, password, ok := strings.Cut(value, ":")
	scope, _, scoped := strings.Cut(value, "=")
	if scoped && (strings.Contains(user, "=") || strings.Contains(scope, "://") || strings.ContainsAny(scope, " \t")) {
		// Meant as HOST=user:password, but HOST is no registry host (a URL,
		// a path, a name, spaces): never send it to every registry instead.
		return "", "", "", errors.New("CHARTPIN_REGISTRY_AUTH: the part before '=' is not a registry host; want HOST=user:password with HOST like ghcr.io or 127.0.0.1:5000, no scheme, path or spaces (the value is not shown)")
	}
	if !ok || user == "" || password == "" {
		return "", "", "", errors.New("CHARTPIN_REGISTRY_AUTH: want user:password or HOST=user:password (the value is not shown)")
	}
	return "", user, password, nil
}

// RegistryAuthKeychain is the keychain for CHARTPIN_REGISTRY_AUTH: scoped
// to one host, the fallback (the Docker config keychain) answers every other
// registry — so a private registry's password is never offered to Docker Hub.
func RegistryAuthKeychain(value string, fallback authn.Keychain) (authn.Keychain, error) {
	host, user, password, err := ParseRegistryAuth(value)
	if err != nil {
		return nil, err
	}
	if host == "" {
		return StaticKeychain(user, password), nil
	}
	return hostKeychain{host: host, auth: authn.FromConfig(authn.AuthConfig{Username: user, Password: password}), next: fallback}, nil
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
