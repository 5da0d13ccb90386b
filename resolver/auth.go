package resolver

import "github.com/google/go-containerregistry/pkg/authn"

// StaticKeychain answers every registry with one username and password
// (CHARTPIN_REGISTRY_AUTH). The secret never appears in an error or log.
func StaticKeychain(user, password string) authn.Keychain {
	return staticKeychain{authn.FromConfig(authn.AuthConfig{Username: user, Password: password})}
}

type staticKeychain struct{ auth authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.auth, nil }
