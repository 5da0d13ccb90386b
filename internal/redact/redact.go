// Package redact makes URLs fit to show in a log line, an error or a pull
// request: no credential is ever printed, logged or written.
package redact

import (
	"errors"
	"io/fs"
	"net"
	"net/url"
	"strings"
)

// URL is raw with its credentials masked: a password, or a user name alone
// (often a token), becomes xxxxx. Anything that is not a URL is returned as
// it is (a file path, an scp-style git remote such as git@host:org/repo).
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Unparseable: mask whatever precedes the last '@' of the authority.
		scheme, rest, ok := strings.Cut(raw, "://")
		if !ok {
			return raw
		}
		auth, path := rest, ""
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			auth, path = rest[:i], rest[i:]
		}
		if i := strings.LastIndex(auth, "@"); i >= 0 {
			return scheme + "://xxxxx@" + auth[i+1:] + path
		}
		return raw
	}
	if u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); !ok {
		u.User = url.User("xxxxx")
		return u.String()
	}
	return u.Redacted()
}

// Private reports whether a secret sent to raw stays private on the way:
// HTTPS, or plain HTTP to this machine (localhost or a loopback address).
func Private(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		if u.Hostname() == "localhost" {
			return true
		}
		ip := net.ParseIP(u.Hostname())
		return ip != nil && ip.IsLoopback()
	}
	return false
}

// Err masks the URL of any *url.Error in err's chain, and the path of any
// *fs.PathError (a URL-like path given where a file is read), in place, and
// returns err. Call it before wrapping: a wrapping error's text is fixed when made.
func Err(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = URL(ue.URL)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		pe.Path = URL(pe.Path)
	}
	return err
}
