package guard

import (
	"errors"
	"net/url"
	"strings"
)

// redactURL is an --index URL fit to show: a password, or a user name alone
// (often a token), is masked. No credential is ever printed, logged or
// written. A file path is returned as it is.
func redactURL(raw string) string {
	if !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Unparseable: mask whatever precedes the last '@' of the authority.
		scheme, rest, _ := strings.Cut(raw, "://")
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

// redactErr masks the URL a *url.Error quotes (net/http masks a password
// there, but not a lone user name; url.Parse masks nothing).
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redactURL(ue.URL)
	}
	return err
}
